-- cancel: a record that has not started (scheduled, deferred or queued) becomes
-- CANCELED. Its dependents can never run, so they are canceled too, with the reason
-- recorded, and the dependency sets are cleaned in both directions (seed 000, design
-- section 7).
-- KEYS: ring ready scheduled stats clock state:deferred state:finished state:failed state:canceled settings running shares sleeping turns ready:total stats:tenants wakeups
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the id
-- Returns the state the record was in; only the three above are canceled.
--@include ending

local id = ARGV[2]
if redis.call('EXISTS', task_key(id)) == 0 then return redis.error_reply('NOT_FOUND ' .. id) end
local now = clock_now()
local state = cancel_with_dependents(id, 'canceled', now)
return flush(now, state)
