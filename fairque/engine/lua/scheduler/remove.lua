-- scheduler/remove: delete a schedule. A run being planned by an instance right now is
-- refused when it fires (its schedule is gone).
-- KEYS: schedules schedules:next schedules:status
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the schedule id
-- Returns 1, or 0 if unknown.

local id = ARGV[2]
redis.call('ZREM', K['schedules:next'], id)
redis.call('HDEL', K['schedules:status'], id)
return redis.call('HDEL', K.schedules, id)
