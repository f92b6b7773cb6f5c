-- scheduler/lock: seed 002's distributed lock on one due schedule, SET NX PX with the
-- instance's owner token.
-- KEYS: schedules schedules:next schedules:status scheduler:lock:<id>
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the schedule id
-- ARGV[3] the token
-- ARGV[4] the lock lifetime (ms)
-- Returns {0} if the schedule is not due (any more), {1} if another instance holds the
-- lock, or {2, server time, next run, definition, status} with the lock held.
--@include schedule_lock

local id = ARGV[2]
local now = clock_now()
local next_run = redis.call('ZSCORE', K['schedules:next'], id)
if not next_run or tonumber(next_run) > now then return {0} end
if not redis.call('SET', K['scheduler:lock'], ARGV[3], 'NX', 'PX', tonumber(ARGV[4])) then
  return {1}
end
return {2, now, next_run, redis.call('HGET', K.schedules, id),
  redis.call('HGET', K['schedules:status'], id)}
