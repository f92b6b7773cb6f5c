-- stats: tasks per state (strict-policy jobs included), counters, and ready tasks per tenant.
-- Returns {flat state/count list, flat counter/value list, flat tenant/ready list}.
-- Reads one entry per tenant with ready work: fine for an operator call, not the hot path.
--@include ready

local now = clock_now()
local queued = 0
local ready = redis.call('HGETALL', K.ready)
local per_tenant = {}
for i = 1, #ready, 2 do
  local count = split_ready(ready[i + 1])
  queued = queued + count
  per_tenant[#per_tenant + 1] = ready[i]
  per_tenant[#per_tenant + 1] = count
end
for _, partition in ipairs(redis.call('SMEMBERS', K['strict:partitions'])) do
  queued = queued + redis.call('ZCARD', strict_key(partition))
end
local states = {
  'queued', queued,
  'scheduled', redis.call('ZCARD', K.scheduled),
  'started', redis.call('ZCARD', K.leases),
  'deferred', redis.call('SCARD', K['state:deferred']),
}
for _, state in ipairs({'finished', 'failed', 'canceled'}) do
  states[#states + 1] = state
  states[#states + 1] = redis.call('ZCOUNT', K['state:' .. state], '(' .. int(now), '+inf')
end
return {states, redis.call('HGETALL', K.stats), per_tenant}
