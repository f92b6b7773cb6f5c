-- scheduler/due: one cycle's look at the schedules, and the instance's heartbeat.
-- KEYS: schedules:next schedules:status scheduler:instances
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the instance id
-- ARGV[3] its record (MessagePack map)
-- ARGV[4] at most this many due schedules
-- Returns {server time, flat list of due id, next run, ..., the earliest next run of
-- any active schedule (or -1)}.
--@include schedule

local now = clock_now()
record_instance(ARGV[2], ARGV[3], now)
local due = redis.call('ZRANGEBYSCORE', K['schedules:next'], '-inf', now, 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[4]))
local first = redis.call('ZRANGE', K['schedules:next'], 0, 0, 'WITHSCORES')
return {now, due, first[2] and tonumber(first[2]) or -1}
