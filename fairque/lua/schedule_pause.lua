-- schedule_pause: pause a schedule (no runs) or resume it (runs from ARGV[8] on).
-- ARGV[6] = id; ARGV[7] = 'pause' or 'resume'; ARGV[8] = next run (us) when resuming.
-- Either way the version moves on, so a run planned before is refused. Returns the state.
--@include schedule

local id, action = ARGV[FIRST_ARG], ARGV[FIRST_ARG + 1]
local status = read_status(id)
if not status then return redis.error_reply('SCHEDULE_NOT_FOUND ' .. id) end
status.v = status.v + 1
if action == 'pause' then
  status.state = 'paused'
  redis.call('ZREM', K['schedules:next'], id)
else
  status.state, status.failures, status.last_error, status.pending_run = 'active', 0, nil, nil
  redis.call('ZADD', K['schedules:next'], tonumber(ARGV[FIRST_ARG + 2]), id)
end
write_status(id, status)
return status.state
