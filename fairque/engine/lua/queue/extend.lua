-- extend: move the lease deadline of a running task to now + seconds (heartbeat).
-- KEYS: leases maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the id
-- ARGV[3] the lease token
-- ARGV[4] seconds
-- Returns the new deadline (us).
--@include lease
--@include writes

local id, token, seconds = ARGV[2], ARGV[3], tonumber(ARGV[4])
if not holds_lease(id, token) then return redis.error_reply('LEASE_LOST ' .. id) end
local now = clock_now()
local deadline = now + math.floor(seconds * MICROS)
redis.call('ZADD', K.leases, 'XX', deadline, id)
note_due(deadline, now)
redis.call('HSET', task_key(id), 'lease_deadline', deadline)
return deadline
