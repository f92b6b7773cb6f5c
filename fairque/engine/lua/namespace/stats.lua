-- stats: records per state (fair tasks, strict jobs and storage tasks), counters, and
-- ready tasks per tenant. Reads one entry per tenant with ready work: fine for an
-- operator call, not the hot path.
-- KEYS: ring ready scheduled leases stats state:deferred state:finished state:failed state:canceled strict:partitions storage:queues maintenance running shares sleeping
-- ARGV[1] the key prefix (include/base.lua)
-- Returns {flat state/count list, flat counter/value list, flat tenant/ready list, flat
-- field/value list of the maintenance hash (see namespace/reap.lua), the fairness view of
-- the last FAIRNESS_MINUTES (namespace/fairness.lua)}.
--@include figures

local FAIRNESS_MINUTES, FAIRNESS_TOP = 5, 20
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
-- Storage tasks (seed 004) in their numbered queues: due ones are queued, others scheduled.
local delayed = 0
for _, n in ipairs(redis.call('HKEYS', K['storage:queues'])) do
  local key = storage_queue_key(n)
  local due = redis.call('ZCOUNT', key, '-inf', now)
  queued = queued + due
  delayed = delayed + redis.call('ZCARD', key) - due
end
local states = {
  'queued', queued,
  'scheduled', redis.call('ZCARD', K.scheduled) + delayed,
  'started', redis.call('ZCARD', K.leases),
  'deferred', redis.call('SCARD', K['state:deferred']),
}
for state, registry in pairs({finished = K['state:finished'], failed = K['state:failed'],
    canceled = K['state:canceled']}) do
  states[#states + 1] = state
  states[#states + 1] = redis.call('ZCOUNT', registry, '(' .. int(now), '+inf')
end
return {states, redis.call('HGETALL', K.stats), per_tenant, redis.call('HGETALL', K.maintenance),
  fairness_reply(now, FAIRNESS_MINUTES, FAIRNESS_TOP)}
