-- stats: records per state (fair tasks, strict jobs and storage tasks), counters, the
-- busiest tenants and the sums over all tenants. O(1) in tenants and tasks (one read per
-- strict partition and numbered queue, which are few): an open dashboard may poll it.
-- KEYS: scheduled leases stats state:deferred state:finished state:failed state:canceled strict:partitions storage:queues maintenance ready:total stats:tenants running shares sleeping ready:tenants
-- FLAGS: no-writes
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] how many of the busiest tenants to return
-- ARGV[3] how many of the busiest tenants' fairness figures to return (0 to 100; 0: the
--   minutes' figures alone, which is what a polling overview needs)
-- Returns {flat state/count list, flat counter/value list, rows of the busiest tenants
-- (include/tenant_stats.lua tenant_stat_rows), flat field/value list of the maintenance
-- hash (see namespace/reap.lua), the fairness view of the last FAIRNESS_MINUTES
-- (namespace/fairness.lua), the sums over tenants of their ready tasks and TENANT_COUNTERS,
-- how many tenants have ready tasks}.
--@include fairness
--@include tenant_stats
--@include strict

local FAIRNESS_MINUTES = 5
local top, fairness_top = tonumber(ARGV[2]), tonumber(ARGV[3])
if fairness_top == nil or fairness_top < 0 or fairness_top > 100 then
  return redis.error_reply('INVALID fairness_top must be 0 to 100')
end
local now = clock_now()
local fair_ready = tonumber(redis.call('GET', K['ready:total']) or '0')
local queued = fair_ready
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
local sums = {fair_ready}
for _, value in ipairs(redis.call('HMGET', K['stats:tenants'], unpack(TENANT_COUNTERS))) do
  sums[#sums + 1] = tonumber(value) or 0
end
return {states, redis.call('HGETALL', K.stats), tenant_stat_rows(0, top - 1),
  redis.call('HGETALL', K.maintenance), fairness_reply(now, FAIRNESS_MINUTES, fairness_top),
  sums, redis.call('ZCARD', K['ready:tenants'])}
