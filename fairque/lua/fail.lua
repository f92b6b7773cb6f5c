-- fail: an attempt failed; retry with backoff while attempts remain, else FAILED.
-- ARGV[6] = id, ARGV[7] = lease token, ARGV[8] = error text, ARGV[9] = 1 to allow a retry.
-- Returns the new state, or an error if the caller no longer held the lease.
--@include ending

local id, token, reason = ARGV[FIRST_ARG], ARGV[FIRST_ARG + 1], ARGV[FIRST_ARG + 2]
if not holds_lease(id, token) then return redis.error_reply('LEASE_LOST ' .. id) end
redis.call('ZREM', K.leases, id)
local now = clock_now()
return flush(now, retry_or_fail(id, now, reason, ARGV[FIRST_ARG + 3] == '1'))
