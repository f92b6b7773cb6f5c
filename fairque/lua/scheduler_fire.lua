-- scheduler_fire: submit one run of a schedule and move it to its next run, in one step,
-- then release the lock. Exactly once: the run is refused unless the schedule is still
-- the version and still due at the time that the caller read under the lock, so a run
-- can never be submitted twice, even by an instance whose lock expired meanwhile.
-- ARGV[6] = id; [7] = lock token; [8] = version; [9] = the next run read under the lock
-- (us); [10] = the run's due time (us); [11] = the run after it (us); [12] = number of
-- tasks (0: the run is skipped, 1: submitted), [13] = the task row, [14] = its payload,
-- as push takes them. Returns {1, server time}, or {0} if the plan was stale.
--@include push
--@include schedule

local id, token, version = ARGV[FIRST_ARG], ARGV[FIRST_ARG + 1], ARGV[FIRST_ARG + 2]
local run_at, next_run = tonumber(ARGV[FIRST_ARG + 4]), tonumber(ARGV[FIRST_ARG + 5])
local status = planned_status(id, token, version, ARGV[FIRST_ARG + 3])
if not status then
  release_lock(token)
  return {0}
end
local now = clock_now()
if tonumber(ARGV[FIRST_ARG + 6]) > 0 then
  local rows = cmsgpack.unpack(ARGV[FIRST_ARG + 7])
  local _, refused = push_rows(rows, FIRST_ARG + 7)
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
