-- backlog: how long the oldest ready fair tasks have waited (the queue's latency), for
-- monitoring: those of the busiest tenants (most ready tasks) and of the tenants the ring
-- served longest ago in each lane, where the namespace's oldest ready task is unless a
-- limit or a pause holds it elsewhere. At most ARGV[2] * (lanes + 1) tenants, a few
-- commands per lane where each has ready tasks.
-- KEYS: ready:tenants lanes
-- FLAGS: no-writes
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] how many tenants of each kind
-- Returns {server time (us), then per tenant looked at: tenant, the time its oldest ready
-- task became ready (us)}.
--@include base

local count = tonumber(ARGV[2])
local reply, seen = {clock_now()}, {}

local function oldest_ready(tenant)
  local oldest = nil
  for _, lane in ipairs(redis.call('SMEMBERS', lanes_of_key(tenant))) do
    local head = redis.call('LINDEX', critical_key(tenant, lane), 0)
    local since = head and tonumber(redis.call('HGET', task_key(head), 'start_time'))
    if since and (oldest == nil or since < oldest) then oldest = since end
    for priority = 1, 5 do
      local first = redis.call('ZRANGE', normal_key(tenant, priority, lane), 0, 0, 'WITHSCORES')
      if first[2] and (oldest == nil or tonumber(first[2]) < oldest) then
        oldest = tonumber(first[2])
      end
    end
  end
  return oldest
end

local function look(tenants)
  for _, tenant in ipairs(tenants) do
    if not seen[tenant] then
      seen[tenant] = true
      local since = oldest_ready(tenant)
      if since then
        reply[#reply + 1] = tenant
        reply[#reply + 1] = since
      end
    end
  end
end

look(redis.call('ZREVRANGE', K['ready:tenants'], 0, count - 1))
for _, lane in ipairs(redis.call('SMEMBERS', K.lanes)) do
  look(redis.call('ZRANGE', lane_key(lane, 'ring'), 0, count - 1))
end
return reply
