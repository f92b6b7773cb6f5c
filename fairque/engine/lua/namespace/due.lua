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
--@include due_times

local earliest = earliest_due(ARGV[2] ~= 'ready')
if earliest == nil then return -1 end
return math.max(0, earliest - clock_now())
