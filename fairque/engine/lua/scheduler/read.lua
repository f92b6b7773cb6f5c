-- scheduler/read: schedules with their status and next run, and the instances (expired
-- instance records are dropped first).
-- KEYS: schedules schedules:next schedules:status scheduler:instances scheduler:instances:expiry
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] 'all' (every schedule) or 'some' (those named next)
-- ARGV[3..] the schedule ids
-- Returns {flat list of id, definition, status, next run (or false), ...; flat list of
-- instance id, record, ...; server time}.
--@include base
--@include scheduler_instances

local now = clock_now()
drop_expired_instances(now)
local ids = {unpack(ARGV, 3)}
if ARGV[2] == 'all' then ids = redis.call('HKEYS', K.schedules) end
local rows = {}
for _, id in ipairs(ids) do
  local definition = redis.call('HGET', K.schedules, id)
  if definition then
    rows[#rows + 1] = id
    rows[#rows + 1] = definition
    rows[#rows + 1] = redis.call('HGET', K['schedules:status'], id)
    rows[#rows + 1] = redis.call('ZSCORE', K['schedules:next'], id)
  end
end
return {rows, redis.call('HGETALL', K['scheduler:instances']), now}
