-- scheduler_lock: seed 002's distributed lock on one due schedule, SET NX PX with the
-- instance's owner token. ARGV[6] = id; ARGV[7] = token; ARGV[8] = lock lifetime (ms).
-- Returns {0} if the schedule is not due (any more), {1} if another instance holds the
-- lock, or {2, server time, next run, definition, status} with the lock held.
--@include schedule

local id = ARGV[FIRST_ARG]
local now = clock_now()
local next_run = redis.call('ZSCORE', K['schedules:next'], id)
if not next_run or tonumber(next_run) > now then return {0} end
if not redis.call('SET', K.lock, ARGV[FIRST_ARG + 1], 'NX', 'PX', tonumber(ARGV[FIRST_ARG + 2])) then
  return {1}
end
return {2, now, next_run, redis.call('HGET', K.schedules, id),
  redis.call('HGET', K['schedules:status'], id)}
