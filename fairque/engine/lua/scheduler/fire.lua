-- scheduler/fire: submit one run of a schedule and move it to its next run, in one
-- step, then release the lock. Exactly once: the run is refused unless the schedule is
-- still the version and still due at the time that the caller read under the lock, so a
-- run can never be submitted twice, even by an instance whose lock expired meanwhile.
-- KEYS: ring ready scheduled stats clock state:deferred strict:partitions constraints schedules:next schedules:status settings scheduler:lock:<id> running shares sleeping turns
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the schedule id
-- ARGV[3] the lock token
-- ARGV[4] the version
-- ARGV[5] the next run read under the lock (us)
-- ARGV[6] the run's due time (us)
-- ARGV[7] the run after it (us)
-- ARGV[8] the number of tasks (0: the run is skipped, 1: submitted)
-- ARGV[9] the task row, as queue/push takes it
-- ARGV[10] its payload
-- Returns {1, server time}, or {0} if the plan was stale.
--@include push
--@include schedule_lock

local id, token, version = ARGV[2], ARGV[3], ARGV[4]
local run_at, next_run = tonumber(ARGV[6]), tonumber(ARGV[7])
local status = planned_status(K['scheduler:lock'], id, token, version, ARGV[5])
if not status then
  release_lock(K['scheduler:lock'], token)
  return {0}
end
local now = clock_now()
if tonumber(ARGV[8]) > 0 then
  local rows = cmsgpack.unpack(ARGV[9])
  local _, refused = push_rows(rows, 9)
  if refused then return refused end
  status.runs = status.runs + 1
  status.last_run, status.last_submitted_at, status.last_task_id = run_at, now, rows[1][1]
else
  status.skipped = status.skipped + 1
end
status.failures, status.last_error, status.pending_run = 0, nil, nil
write_status(id, status)
redis.call('ZADD', K['schedules:next'], next_run, id)
release_lock(K['scheduler:lock'], token)
return flush(now, {1, now})
