-- scheduler/fire: submit one run of a schedule and move it to its next run, in one
-- step, then release the lock. Exactly once: the run is refused unless the schedule is
-- still the version and still due at the time that the caller read under the lock, so a
-- run can never be submitted twice, even by an instance whose lock expired meanwhile.
-- KEYS: ring ready scheduled leases stats clock state:deferred state:finished state:failed state:canceled strict:partitions constraints schedules:next schedules:status scheduler:lock:<id>
-- ARGV[1..5] the namespace head (include/base.lua)
-- ARGV[6] the schedule id
-- ARGV[7] the lock token
-- ARGV[8] the version
-- ARGV[9] the next run read under the lock (us)
-- ARGV[10] the run's due time (us)
-- ARGV[11] the run after it (us)
-- ARGV[12] the number of tasks (0: the run is skipped, 1: submitted)
-- ARGV[13] the task row, as queue/push takes it
-- ARGV[14] its payload
-- Returns {1, server time}, or {0} if the plan was stale.
--@include push
--@include schedule_lock

local id, token, version = ARGV[6], ARGV[7], ARGV[8]
local run_at, next_run = tonumber(ARGV[10]), tonumber(ARGV[11])
local status = planned_status(id, token, version, ARGV[9])
if not status then
  release_lock(token)
  return {0}
end
local now = clock_now()
if tonumber(ARGV[12]) > 0 then
  local rows = cmsgpack.unpack(ARGV[13])
  local _, refused = push_rows(rows, 13)
  if refused then return refused end
  status.runs = status.runs + 1
  status.last_run, status.last_submitted_at, status.last_task_id = run_at, now, rows[1][1]
else
  status.skipped = status.skipped + 1
end
status.failures, status.last_error, status.pending_run = 0, nil, nil
write_status(id, status)
redis.call('ZADD', K['schedules:next'], next_run, id)
release_lock(token)
return flush(now, {1, now})
