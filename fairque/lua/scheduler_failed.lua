-- scheduler_failed: a run could not be submitted. It is tried again after a backoff of
-- base * 2^(failures-1) seconds (capped), keeping its due time; after max_retries
-- failures in a row the schedule is FAILED (out of the next-run index) until updated or
-- resumed. Then the lock is released.
-- ARGV[6] = id; [7] = lock token; [8] = version; [9] = next run read under the lock;
-- [10] = the run's due time (us); [11] = error; [12] = max_retries; [13] = backoff base
-- (s); [14] = backoff cap (s). Returns {state, next run or -1}, or {} if the plan was stale.
--@include schedule

local id, token, version = ARGV[FIRST_ARG], ARGV[FIRST_ARG + 1], ARGV[FIRST_ARG + 2]
local status = planned_status(id, token, version, ARGV[FIRST_ARG + 3])
if not status then
  release_lock(token)
  return {}
end
local now = clock_now()
status.failures = status.failures + 1
status.last_error, status.pending_run = ARGV[FIRST_ARG + 5], tonumber(ARGV[FIRST_ARG + 4])
local next_run = -1
if status.failures > tonumber(ARGV[FIRST_ARG + 6]) then
  status.state = 'failed'
  redis.call('ZREM', K['schedules:next'], id)
else
  local backoff = tonumber(ARGV[FIRST_ARG + 7]) * 2 ^ (status.failures - 1)
  next_run = now + math.min(backoff, tonumber(ARGV[FIRST_ARG + 8])) * MICROS
  redis.call('ZADD', K['schedules:next'], next_run, id)
end
write_status(id, status)
release_lock(token)
return {status.state, next_run}
