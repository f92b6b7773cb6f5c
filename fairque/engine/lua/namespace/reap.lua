-- reap: one round of the namespace's maintenance (include/rounds.lua), if one is due.
-- The master and the scheduler call it every few seconds, a busy worker with its beat
-- (queue/upkeep.lua).
-- KEYS: workers workers:expiry workers:functions scheduled leases stats clock state:deferred deps:cursor state:finished state:failed state:canceled strict:partitions constraints maintenance settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the bound on each kind of work in one round ('': 10 x maintenance_batch)
-- ARGV[3] the interval between rounds (us); 0 runs a round now
-- Returns {1 if a round ran, leases expired, promoted, registry entries dropped,
-- orphaned tasks canceled, 1 if work is left for the next round}.
--@include rounds

local now = clock_now()
local done = maintenance_round(now, tonumber(ARGV[2]), tonumber(ARGV[3]))
if done[1] == 0 then return done end
return flush(now, done)
