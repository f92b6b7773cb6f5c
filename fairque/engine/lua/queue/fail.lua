-- fail: an attempt failed; retry with backoff while attempts remain, else FAILED.
-- KEYS: scheduled leases stats clock state:finished state:failed state:canceled settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the id
-- ARGV[3] the lease token
-- ARGV[4] the error text
-- ARGV[5] 1 to allow a retry
-- ARGV[6] the exception's qualified type ('' if unknown)
-- ARGV[7] its traceback ('' if none)
-- Returns the new state, or an error if the caller no longer held the lease.
--@include ending

local id, token, reason = ARGV[2], ARGV[3], ARGV[4]
if not drop_lease(id, token) then return redis.error_reply('LEASE_LOST ' .. id) end
local now = clock_now()
return flush(now, retry_or_fail(id, now, reason, ARGV[5] == '1', ARGV[6], ARGV[7]))
