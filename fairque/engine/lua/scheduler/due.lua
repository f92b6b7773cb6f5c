-- scheduler/due: one cycle's look at the schedules, and the instance's heartbeat.
-- KEYS: schedules:next scheduler:instances scheduler:instances:expiry
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the instance id
-- ARGV[3] its record (MessagePack map)
-- ARGV[4] at most this many due schedules
-- ARGV[5] the record's time to live (us)
-- Returns {server time, flat list of due id, next run, ..., the earliest next run of
-- any active schedule (or -1)}.
--@include scheduler_instances

local now = clock_now()
drop_expired_instances(now)
record_instance(ARGV[2], ARGV[3], now, tonumber(ARGV[5]))
local due = redis.call('ZRANGEBYSCORE', K['schedules:next'], '-inf', now, 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[4]))
local first = redis.call('ZRANGE', K['schedules:next'], 0, 0, 'WITHSCORES')
return {now, due, first[2] and tonumber(first[2]) or -1}
