-- scheduler/save: add a schedule, or replace the definition of an existing one.
-- An update starts the schedule afresh: failures are forgotten, a failed schedule is
-- active again, a paused one stays paused.
-- KEYS: schedules schedules:next schedules:status
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the schedule id
-- ARGV[3] 'add' or 'update'
-- ARGV[4] the definition (MessagePack)
-- ARGV[5] its next run (us)
-- ARGV[6] the version an update expects ('' = any)
-- Returns the new version.
--@include schedule

local id, mode, definition = ARGV[2], ARGV[3], ARGV[4]
local next_run, expected = tonumber(ARGV[5]), ARGV[6]
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
