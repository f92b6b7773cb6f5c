-- Ready work: per-tenant queues, the per-tenant ready entry and the global ring.
--
-- A tenant's score in the `ready` zset is count * 64 + levels: how many ready tasks it
-- has, and a bitmask of its queues that may hold tasks (a superset: a pop clears the
-- bits of queues it finds empty), so a pop reads both in one score and probes only
-- queues that have work. Scores order tenants by backlog, so the busiest are read
-- first without a scan; `ready:total` keeps the sum of the counts, so the number of
-- ready fair tasks costs one read however many tenants there are. Invariant: a tenant is in the ring exactly when its count is
-- above zero and its shares let it start a task (shares.lua); a tenant whose rate
-- window is full waits in K.sleeping instead. Strict-policy jobs (kind 'job') have their
-- own partitions (strict.lua).
--
-- Every record says what it is in its `kind` field, written when it is created: 'task'
-- (the fair queue), 'job' (the strict policy) or 'storage' (a numbered queue).
--@include writes
--@include strict
--@include shares

local LEVELS = 64

-- The `levels` bit of a queue: 1 for the critical list, 2^p for normal priority p.
local function level_bit(priority)
  if priority == CRITICAL then return 1 end
  return 2 ^ priority
end

-- A ready entry as {count, levels}.
local function split_ready(entry)
  entry = tonumber(entry) or 0
  return math.floor(entry / LEVELS), entry % LEVELS
end

-- Ready tasks added in this call, per tenant, in the order tenants first appeared, and
-- the levels they were added to.
local ready_added, ready_tenants, ready_levels = nil, nil, nil

-- Queues record `id` as ready since `start_time` (the caller sets its hash): a strict
-- job in its partition, a fair task in its tenant's queues, where a critical task handed
-- back (`first`) goes to the head of its list.
local function queue_ready(id, kind, tenant, priority, start_time, first)
  if kind == 'job' then return queue_strict(id) end
  if ready_added == nil then ready_added, ready_tenants, ready_levels = {}, {}, {} end
  ready_levels[tenant] = bit.bor(ready_levels[tenant] or 0, level_bit(priority))
  if priority == CRITICAL then
    append(first and 'LPUSH' or 'RPUSH', critical_key(tenant), id)
  else
    append('ZADD', normal_key(tenant, priority), start_time, id)
  end
  if ready_added[tenant] == nil then
    ready_added[tenant] = 0
    ready_tenants[#ready_tenants + 1] = tenant
  end
  ready_added[tenant] = ready_added[tenant] + 1
end

-- The ring, the ready entries, the running counts and the tenants' counters are written
-- for every tenant a call serves: a pop that reaches WIDE tenants or more takes them out
-- of their listpacks (see leave_listpack).
local WIDE = 8
local function unpack_tenant_keys()
  leave_listpack(K.ring, 'zset')
  leave_listpack(K.ready, 'zset')
  leave_listpack(K.running, 'hash')
  leave_listpack(K['stats:tenants'], 'hash')
end

-- Puts `tenant` where its ready count and shares say: in the ring (joining at the back
-- if it was not there), asleep until its rate window opens, or in neither (no ready
-- work, paused, at its concurrency limit). Returns true if it is in the ring.
local function place(tenant, now)
  local ready = split_ready(redis.call('ZSCORE', K.ready, tenant))
  local s = shares_of(tenant)
  local room, opens = 1, nil
  if ready > 0 then room, opens = start_room(tenant, s, now) end
  if s then
    if opens then
      redis.call('ZADD', K.sleeping, opens, tenant)
    else
      redis.call('ZREM', K.sleeping, tenant)
    end
  end
  if ready > 0 and room > 0 then
    redis.call('ZADD', K.ring, 'NX', next_tick(now), tenant)
    return true
  end
  redis.call('ZREM', K.ring, tenant)
  if ready == 0 and s and s.weight > 1 then redis.call('HDEL', K.turns, tenant) end
  return false
end

-- A tenant's shares and where it stands: its SHARE_FIELDS in order (period in us, paused
-- 0/1), then running, ready, in the ring (0/1), when its rate window opens (us, or -1).
local function shares_row(tenant)
  local s = shares_of(tenant) or DEFAULT_SHARES
  local row = {}
  for i, field in ipairs(SHARE_FIELDS) do row[i] = s[field] end
  row[#row + 1] = running_of(tenant)
  row[#row + 1] = split_ready(redis.call('ZSCORE', K.ready, tenant))
  row[#row + 1] = redis.call('ZSCORE', K.ring, tenant) and 1 or 0
  row[#row + 1] = tonumber(redis.call('ZSCORE', K.sleeping, tenant)) or -1
  return row
end

-- K.wakeups holds one token while a tenant may be served, none otherwise. A worker on
-- one server waits in BLPOP on it with its pop pipelined behind (FairQueue.pop's
-- `wait`): the pop runs as soon as the token comes, with no round trip after the
-- wake-up. A pop takes the token away or passes it on (see pop.lua), so waiting workers
-- wake one after another while work is left, and at most one wake-up finds nothing.
local function signal_ready()
  if redis.call('LLEN', K.wakeups) == 0 then redis.call('RPUSH', K.wakeups, 1) end
end

-- Idle workers wait on the token above, or on `wake` (sharded pub/sub: on a cluster the
-- message stays within the shard of the namespace); both are given only when a tenant
-- may be served.
local function wake_workers(tenants)
  if tenants > 0 then
    redis.call('SPUBLISH', PREFIX .. 'wake', tenants)
    signal_ready()
  end
end

-- Writes the queued ids, the ready entries, and the ring for tenants that came back
-- (they join at the back of the ring), and wakes idle workers if any of those may be
-- served now.
local function flush_ready(now)
  flush_appends()
  if ready_tenants == nil then return end
  local servable, total = 0, 0
  for _, tenant in ipairs(ready_tenants) do
    local added = ready_added[tenant]
    total = total + added
    local ready, levels = split_ready(redis.call('ZINCRBY', K.ready, added * LEVELS, tenant))
    local missing = bit.band(ready_levels[tenant], bit.bnot(levels))
    if missing ~= 0 then redis.call('ZINCRBY', K.ready, missing, tenant) end
    -- Only a tenant that had no ready task can change what workers may serve: one that
    -- had some is in the ring already (or held by its shares, which this does not
    -- change), and workers were woken when it came in. More work for it wakes no one.
    if ready == added then
      if not shares_of(tenant) then
        redis.call('ZADD', K.ring, 'NX', next_tick(now), tenant)
        servable = servable + 1
      elseif place(tenant, now) then
        servable = servable + 1
      end
    end
  end
  redis.call('INCRBY', K['ready:total'], total)
  wake_workers(servable)
  ready_added, ready_tenants, ready_levels = nil, nil, nil
end

-- Takes the leases that ended in this call off K.running; a tenant that its concurrency
-- limit held comes back into the ring at once.
local function flush_running(now)
  if leases_ended_tenants == nil then return end
  local servable = 0
  for _, tenant in ipairs(leases_ended_tenants) do
    if redis.call('HINCRBY', K.running, tenant, -leases_ended[tenant]) <= 0 then
      redis.call('HDEL', K.running, tenant)
    end
    local s = shares_of(tenant)
    if s and s.concurrency > 0 and place(tenant, now) then servable = servable + 1 end
  end
  wake_workers(servable)
  leases_ended, leases_ended_tenants = nil, nil
end

-- Tenants whose rate window opened come back into the ring (at most `limit`).
local function wake_sleepers(now, limit)
  local due = redis.call('ZRANGEBYSCORE', K.sleeping, '-inf', now, 'LIMIT', 0, limit)
  if #due == 0 then return 0 end
  redis.call('ZREM', K.sleeping, unpack(due))
  local servable = 0
  for _, tenant in ipairs(due) do
    if place(tenant, now) then servable = servable + 1 end
  end
  wake_workers(servable)
  return #due
end

-- One ready task of `tenant` left its queues outside a pop (cancel).
local function release_ready(tenant)
  redis.call('DECR', K['ready:total'])
  local ready = split_ready(redis.call('ZINCRBY', K.ready, -LEVELS, tenant))
  if ready <= 0 then
    redis.call('ZREM', K.ready, tenant)
    place(tenant, clock_now())
  end
end

-- Removes a queued task from its tenant queue (cancel); returns true if it was there.
local function unqueue(id, kind, tenant, priority)
  if kind == 'job' then return unqueue_strict(id) end
  local removed
  if priority == CRITICAL then
    removed = redis.call('LREM', critical_key(tenant), 1, id)
  else
    removed = redis.call('ZREM', normal_key(tenant, priority), id)
  end
  if removed == 1 then release_ready(tenant) end
  return removed == 1
end

-- The per-tenant counters that stats rows show (TenantStats), in reply order.
local TENANT_COUNTERS = {'pushed', 'finished', 'failed', 'retried', 'requeued', 'canceled',
  'expired'}

-- A tenant's stats row: {tenant, ready, counters in TENANT_COUNTERS order}.
local function tenant_stat_row(tenant, score)
  local fields = {}
  for i, name in ipairs(TENANT_COUNTERS) do fields[i] = name .. ':' .. tenant end
  local row = {tenant, (split_ready(score))}
  for _, value in ipairs(redis.call('HMGET', K['stats:tenants'], unpack(fields))) do
    row[#row + 1] = tonumber(value) or 0
  end
  return row
end

-- Stats rows of the tenants ranked `first` to `last` (0-based) by ready backlog, the
-- busiest first. Costs O(log tenants + rows): nothing here goes over every tenant.
local function tenant_stat_rows(first, last)
  local ranked = redis.call('ZREVRANGE', K.ready, first, last, 'WITHSCORES')
  local rows = {}
  for i = 1, #ranked, 2 do rows[#rows + 1] = tenant_stat_row(ranked[i], ranked[i + 1]) end
  return rows
end
