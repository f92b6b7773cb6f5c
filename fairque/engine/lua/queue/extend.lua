-- extend: move the lease deadline of a running task to now + seconds (heartbeat).
-- KEYS: ring ready scheduled leases stats clock state:deferred state:finished state:failed state:canceled strict:partitions constraints
-- ARGV[1..5] the namespace head (include/base.lua)
-- ARGV[6] the id
-- ARGV[7] the lease token
-- ARGV[8] seconds
-- Returns the new deadline (us).
--@include ending

local id, token, seconds = ARGV[6], ARGV[7], tonumber(ARGV[8])
if not holds_lease(id, token) then return redis.error_reply('LEASE_LOST ' .. id) end
local deadline = clock_now() + math.floor(seconds * MICROS)
redis.call('ZADD', K.leases, 'XX', deadline, id)
redis.call('HSET', task_key(id), 'lease_deadline', deadline)
return deadline
