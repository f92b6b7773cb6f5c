-- scheduler/fire: submit planned runs, each with its schedule moved to its next run in
-- the same step, then release their locks. Exactly once: a run is refused unless its
-- schedule is still the version and still due at the time that the caller read under
-- the lock, so a run can never be submitted twice, even by an instance whose lock
-- expired meanwhile. Each run stands alone: a stale or refused one does not stop the
-- others; a refused run changes nothing and keeps its lock (the caller records the
-- failure with scheduler/failed, which releases it).
-- KEYS: scheduled stats clock state:deferred strict:partitions constraints schedules:next schedules:status settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running names:defaults maintenance:quiet scheduler:lock:<id>...
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2..] per run, RUN_ARGS in a row (its lock is the next variadic key): the schedule
--   id, the lock token, the version, the next run read under the lock (us), the run's
--   due time (us), the run after it (us), the task row as queue/push takes it ('': the
--   run is skipped), its payload
-- Returns {server time, one outcome per run: 1 done (submitted or skipped), 0 stale (the
-- plan was refused), or the error message of a refused submission}.
--@include push
--@include ending
--@include schedule_lock

local RUN_ARGS = 8
local runs = (#ARGV - 1) / RUN_ARGS
if runs % 1 ~= 0 or runs ~= #KEYS - KEY_COUNT then
  return redis.error_reply('INVALID runs do not match their locks')
end
local now = clock_now()
local outcomes = {}
for n = 1, runs do
  local at = 2 + (n - 1) * RUN_ARGS
  local id, token, version, lock = ARGV[at], ARGV[at + 1], ARGV[at + 2], KEYS[KEY_COUNT + n]
  local status = planned_status(lock, id, token, version, ARGV[at + 3])
  local outcome = 1
  if not status then
    release_lock(lock, token)
    outcome = 0
  elseif ARGV[at + 6] ~= '' then
    local row = cmsgpack.unpack(ARGV[at + 6])
    local _, refused = push_rows(row, 1, at + 6) -- the payload is ARGV[at + 7]
    if refused then
      outcome = refused.err
    else
      status.runs = status.runs + 1
      status.last_run, status.last_submitted_at, status.last_task_id =
        tonumber(ARGV[at + 4]), now, row[1]
    end
  else
    status.skipped = status.skipped + 1
  end
  if outcome == 1 then
    status.failures, status.last_error, status.pending_run = 0, nil, nil
    write_status(id, status)
    redis.call('ZADD', K['schedules:next'], tonumber(ARGV[at + 5]), id)
    release_lock(lock, token)
  end
  outcomes[n] = outcome
end
return flush(now, {now, outcomes})
