-- extend: move the lease deadline of a running task to now + seconds (heartbeat).
-- ARGV[6] = id, ARGV[7] = lease token, ARGV[8] = seconds. Returns the new deadline (us).
--@include ending

local id, token, seconds = ARGV[FIRST_ARG], ARGV[FIRST_ARG + 1], tonumber(ARGV[FIRST_ARG + 2])
if not holds_lease(id, token) then return redis.error_reply('LEASE_LOST ' .. id) end
local deadline = clock_now() + math.floor(seconds * MICROS)
redis.call('ZADD', K.leases, 'XX', deadline, id)
redis.call('HSET', task_key(id), 'lease_deadline', deadline)
return deadline
