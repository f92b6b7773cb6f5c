-- due: how long until the next scheduled task is due, so an idle worker can wake for it.
-- Returns microseconds (0 if one is due now), or -1 when nothing is scheduled.
--@include base

local head = redis.call('ZRANGE', K.scheduled, 0, 0, 'WITHSCORES')
if not head[1] then return -1 end
return math.max(0, tonumber(head[2]) - clock_now())
