-- schedule_remove: delete a schedule. A run being planned by an instance right now is
-- refused when it fires (its schedule is gone). ARGV[6] = id. Returns 1, or 0 if unknown.
--@include schedule

local id = ARGV[FIRST_ARG]
redis.call('ZREM', K['schedules:next'], id)
redis.call('HDEL', K['schedules:status'], id)
return redis.call('HDEL', K.schedules, id)
