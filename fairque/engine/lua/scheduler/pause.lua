-- scheduler/pause: pause a schedule (no runs) or resume it (runs from ARGV[4] on).
-- Either way the version moves on, so a run planned before is refused.
-- KEYS: schedules:next schedules:status
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the schedule id
-- ARGV[3] 'pause' or 'resume'
-- ARGV[4] the next run (us) when resuming
-- Returns the state.
--@include schedule

local id, action = ARGV[2], ARGV[3]
local status = read_status(id)
if not status then return redis.error_reply('SCHEDULE_NOT_FOUND ' .. id) end
status.v = status.v + 1
if action == 'pause' then
  status.state = 'paused'
  redis.call('ZREM', K['schedules:next'], id)
else
  status.state, status.failures, status.last_error, status.pending_run = 'active', 0, nil, nil
  redis.call('ZADD', K['schedules:next'], tonumber(ARGV[4]), id)
end
write_status(id, status)
return status.state
