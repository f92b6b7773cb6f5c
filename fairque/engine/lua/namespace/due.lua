-- due: how long until something becomes ready without a push: the next scheduled task
-- (a delay or a retry backoff), the earliest lease deadline (a worker that died) or the
-- next tenant rate window to open, so an idle worker can wake for it.
-- KEYS: scheduled leases sleeping
-- FLAGS: no-writes
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] 'ready' to leave out the leases: what a pop makes ready by itself (a waiting
--         pop wakes for that; an expired lease waits for the maintenance round), or ''
-- Returns microseconds (0: now), or -1 for nothing.
--@include base

local next_time = nil
local keys = {K.scheduled, K.leases, K.sleeping}
if ARGV[2] == 'ready' then keys = {K.scheduled, K.sleeping} end
for _, key in ipairs(keys) do
  local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if head[1] and (next_time == nil or tonumber(head[2]) < next_time) then
    next_time = tonumber(head[2])
  end
end
if next_time == nil then return -1 end
return math.max(0, next_time - clock_now())
