-- fail: an attempt failed; retry with backoff while attempts remain, else FAILED.
-- KEYS: ring ready scheduled leases stats clock state:deferred state:finished state:failed state:canceled strict:partitions constraints
-- ARGV[1..5] the namespace head (include/base.lua)
-- ARGV[6] the id
-- ARGV[7] the lease token
-- ARGV[8] the error text
-- ARGV[9] 1 to allow a retry
-- Returns the new state, or an error if the caller no longer held the lease.
--@include ending

local id, token, reason = ARGV[6], ARGV[7], ARGV[8]
if not holds_lease(id, token) then return redis.error_reply('LEASE_LOST ' .. id) end
redis.call('ZREM', K.leases, id)
local now = clock_now()
return flush(now, retry_or_fail(id, now, reason, ARGV[9] == '1'))
