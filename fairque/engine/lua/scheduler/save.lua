-- scheduler/save: add a schedule, or replace the definition of an existing one.
-- An update starts the schedule afresh: failures are forgotten, a failed schedule is
-- active again, a paused one stays paused.
-- KEYS: schedules schedules:next schedules:status
-- ARGV[1..5] the namespace head (include/base.lua)
-- ARGV[6] the schedule id
-- ARGV[7] 'add' or 'update'
-- ARGV[8] the definition (MessagePack)
-- ARGV[9] its next run (us)
-- ARGV[10] the version an update expects ('' = any)
-- Returns the new version.
--@include schedule

local id, mode, definition = ARGV[6], ARGV[7], ARGV[8]
local next_run, expected = tonumber(ARGV[9]), ARGV[10]
local status = read_status(id)
if mode == 'add' then
  if status then return redis.error_reply('DUPLICATE_SCHEDULE ' .. id) end
  status = {v = 0, state = 'active', runs = 0, skipped = 0, failures = 0}
else
  if not status then return redis.error_reply('SCHEDULE_NOT_FOUND ' .. id) end
  if expected ~= '' and tonumber(expected) ~= status.v then
    return redis.error_reply('SCHEDULE_CHANGED ' .. id)
  end
end
status.v = status.v + 1
status.failures, status.last_error, status.pending_run = 0, nil, nil
if status.state == 'failed' then status.state = 'active' end
redis.call('HSET', K.schedules, id, definition)
write_status(id, status)
if status.state == 'active' then
  redis.call('ZADD', K['schedules:next'], next_run, id)
else
  redis.call('ZREM', K['schedules:next'], id)
end
return status.v
