-- scheduler_due: one cycle's look at the schedules, and the instance's heartbeat.
-- ARGV[6] = instance id; ARGV[7] = its record (MessagePack map); ARGV[8] = at most
-- this many due schedules. Returns {server time, flat list of due id, next run, ...,
-- the earliest next run of any active schedule (or -1)}.
--@include schedule

local now = clock_now()
record_instance(ARGV[FIRST_ARG], ARGV[FIRST_ARG + 1], now)
local due = redis.call('ZRANGEBYSCORE', K['schedules:next'], '-inf', now, 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[FIRST_ARG + 2]))
local first = redis.call('ZRANGE', K['schedules:next'], 0, 0, 'WITHSCORES')
return {now, due, first[2] and tonumber(first[2]) or -1}
