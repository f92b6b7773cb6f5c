-- get: one task's fields and its kept result.
-- ARGV[6] = id.
-- Returns {flat field/value list, result or false}; an empty list if there is no task.
--@include base

local id = ARGV[FIRST_ARG]
return {redis.call('HGETALL', task_key(id)), redis.call('GET', result_key(id))}
