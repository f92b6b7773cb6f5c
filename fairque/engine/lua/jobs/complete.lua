-- jobs/complete: the outcome of a leased strict-policy job (the seed 003 result object).
-- KEYS: ring ready scheduled leases stats clock state:deferred state:finished state:failed state:canceled strict:partitions constraints settings running shares sleeping turns ready:total stats:tenants
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the id
-- ARGV[3] the lease token
-- ARGV[4] success, failure, or release (back to the queue, attempts unchanged: it
--   never reached a worker)
-- ARGV[5] 1 if a failure may be retried
-- ARGV[6] the error message
-- ARGV[7] the result object (MessagePack)
-- ARGV[8] seconds to keep it when the job asked for it (0: never)
-- Returns the job's new state, or an error if the caller no longer held the lease.
--@include ending

local id, token = ARGV[2], ARGV[3]
local kind, retry = ARGV[4], ARGV[5] == '1'
local message, result = ARGV[6], ARGV[7]
local result_ttl = tonumber(ARGV[8])
if not holds_lease(id, token) then return redis.error_reply('LEASE_LOST ' .. id) end
local refused = too_big('result', result)
if refused then return refused end
local now = clock_now()
redis.call('ZREM', K.leases, id)
local f = redis.call('HMGET', task_key(id), 'partition', 'keep_result', 'has_dependents')
for _, cid in ipairs(split_partition(f[1])) do redis.call('ZREM', running_key(cid), id) end
local state = 'finished'
if kind == 'release' then
  state = 'queued'
  redis.call('HSET', task_key(id), 'state', state)
  queue_strict(id)
  count('released')
elseif kind == 'success' then
  end_task(id, false, 'finished', now, nil)
  if f[3] then release_dependents(id, now) end
else
  state = retry_or_fail(id, now, message, retry)
end
-- Only a final outcome is kept: the pusher gets the last attempt's.
if f[2] == '1' and (state == 'finished' or state == 'failed') and result_ttl > 0 then
  redis.call('SET', result_key(id), result, 'EX', math.ceil(result_ttl))
end
return flush(now, state)
