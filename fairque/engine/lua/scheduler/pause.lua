-- scheduler/pause: pause a schedule (no runs) or resume it (runs from ARGV[8] on).
-- Either way the version moves on, so a run planned before is refused.
-- KEYS: schedules:next schedules:status
-- ARGV[1..5] the namespace head (include/base.lua)
-- ARGV[6] the schedule id
-- ARGV[7] 'pause' or 'resume'
-- ARGV[8] the next run (us) when resuming
-- Returns the state.
--@include schedule

local id, action = ARGV[6], ARGV[7]
local status = read_status(id)
if not status then return redis.error_reply('SCHEDULE_NOT_FOUND ' .. id) end
status.v = status.v + 1
if action == 'pause' then
  status.state = 'paused'
  redis.call('ZREM', K['schedules:next'], id)
else
  status.state, status.failures, status.last_error, status.pending_run = 'active', 0, nil, nil
  redis.call('ZADD', K['schedules:next'], tonumber(ARGV[8]), id)
end
write_status(id, status)
return status.state
