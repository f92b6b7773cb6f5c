-- get: one task's fields, its kept result, what it waits for and what waits for it.
-- ARGV[6] = id.
-- Returns {flat field/value list, result or false, blocked by, dependents}; an empty
-- field list if there is no task.
--@include base

local id = ARGV[FIRST_ARG]
return {redis.call('HGETALL', task_key(id)), redis.call('GET', result_key(id)),
  redis.call('SMEMBERS', blocked_key(id)), redis.call('SMEMBERS', waiting_key(id))}
