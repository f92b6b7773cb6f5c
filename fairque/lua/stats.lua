-- stats: tasks per state, counters, and ready tasks per tenant.
-- Returns {flat state/count list, flat counter/value list, flat tenant/ready list}.
-- Reads one entry per tenant with ready work: fine for an operator call, not the hot path.
--@include base

local now = clock_now()
local queued = 0
local ready = redis.call('HGETALL', K.ready)
for i = 2, #ready, 2 do queued = queued + tonumber(ready[i]) end
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
return {states, redis.call('HGETALL', K.stats), ready}
