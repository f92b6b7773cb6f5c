-- scheduler/failed: a run could not be submitted. It is tried again after a backoff of
-- base * 2^(failures-1) seconds (capped), keeping its due time; after max_retries
-- failures in a row the schedule is FAILED (out of the next-run index) until updated or
-- resumed. Then the lock is released.
-- KEYS: schedules:next schedules:status scheduler:lock:<id>
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the schedule id
-- ARGV[3] the lock token
-- ARGV[4] the version
-- ARGV[5] the next run read under the lock
-- ARGV[6] the run's due time (us)
-- ARGV[7] the error
-- ARGV[8] max_retries
-- ARGV[9] the backoff base (s)
-- ARGV[10] the backoff cap (s)
-- Returns {state, next run or -1}, or {} if the plan was stale.
--@include schedule_lock

local id, token, version = ARGV[2], ARGV[3], ARGV[4]
local status = planned_status(K['scheduler:lock'], id, token, version, ARGV[5])
if not status then
  release_lock(K['scheduler:lock'], token)
  return {}
end
local now = clock_now()
status.failures = status.failures + 1
status.last_error, status.pending_run = ARGV[7], tonumber(ARGV[6])
local next_run = -1
if status.failures > tonumber(ARGV[8]) then
  status.state = 'failed'
  redis.call('ZREM', K['schedules:next'], id)
else
  local backoff = tonumber(ARGV[9]) * 2 ^ (status.failures - 1)
  next_run = now + math.min(backoff, tonumber(ARGV[10])) * MICROS
  redis.call('ZADD', K['schedules:next'], next_run, id)
end
write_status(id, status)
release_lock(K['scheduler:lock'], token)
return {status.state, next_run}
