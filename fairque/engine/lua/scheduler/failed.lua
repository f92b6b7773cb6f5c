-- scheduler/failed: a run could not be submitted. It is tried again after a backoff of
-- base * 2^(failures-1) seconds (capped), keeping its due time; after max_retries
-- failures in a row the schedule is FAILED (out of the next-run index) until updated or
-- resumed. Then the lock is released.
-- KEYS: schedules:next schedules:status scheduler:lock:<id>
-- ARGV[1..5] the namespace head (include/base.lua)
-- ARGV[6] the schedule id
-- ARGV[7] the lock token
-- ARGV[8] the version
-- ARGV[9] the next run read under the lock
-- ARGV[10] the run's due time (us)
-- ARGV[11] the error
-- ARGV[12] max_retries
-- ARGV[13] the backoff base (s)
-- ARGV[14] the backoff cap (s)
-- Returns {state, next run or -1}, or {} if the plan was stale.
--@include schedule_lock

local id, token, version = ARGV[6], ARGV[7], ARGV[8]
local status = planned_status(id, token, version, ARGV[9])
if not status then
  release_lock(token)
  return {}
end
local now = clock_now()
status.failures = status.failures + 1
status.last_error, status.pending_run = ARGV[11], tonumber(ARGV[10])
local next_run = -1
if status.failures > tonumber(ARGV[12]) then
  status.state = 'failed'
  redis.call('ZREM', K['schedules:next'], id)
else
  local backoff = tonumber(ARGV[13]) * 2 ^ (status.failures - 1)
  next_run = now + math.min(backoff, tonumber(ARGV[14])) * MICROS
  redis.call('ZADD', K['schedules:next'], next_run, id)
end
write_status(id, status)
release_lock(token)
return {status.state, next_run}
