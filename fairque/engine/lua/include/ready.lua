-- Ready work: per-tenant queues, the per-tenant ready entry and the global ring.
--
-- Fair tasks wait in lanes, one per task name (base.lua's lane_key). In a lane, a
-- tenant's score in the lane's `ready` zset is count * 64 + levels: how many ready tasks
-- it has there, and a bitmask of its queues that may hold tasks (a superset: a pop clears
-- the bits of queues it finds empty), so a pop reads both in one score and probes only
-- queues that have work. Across lanes, `ready:tenants` holds each tenant's ready count
-- (ranking tenants by backlog without a scan), `ready:total` their sum, K.lanes the lanes
-- that may hold ready tasks, and lanes_of_key(tenant) the lanes where the tenant has some.
-- Invariant: a tenant is in a lane's ring exactly when its count there is above zero and
-- its shares let it start a task (shares.lua: shares, running counts, turns and rate
-- windows are the tenant's, across lanes); a tenant whose rate window is full waits in
-- K.sleeping instead. Strict-policy jobs (kind 'job') have their own partitions
-- (strict.lua).
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

-- Ready tasks added in this call, per lane and tenant, as count * LEVELS + the levels
-- they were added to; and the lanes and tenants in the order they first appeared (lane,
-- tenant, lane, tenant...). The first lane and tenant of a call are kept in ready_lane,
-- ready_tenant and ready_entry, and the tables are made only for a second (a one-task
-- push adds one: its three tables cost it ~6k).
local ready_added, ready_order = nil, nil
local ready_lane, ready_tenant, ready_entry = nil, nil, 0

-- `entry` (count * LEVELS + levels) with one more task, at `priority`.
local function entry_with(entry, priority)
  return entry + LEVELS - entry % LEVELS + bit.bor(entry % LEVELS, level_bit(priority))
end

-- Queues record `id` as ready since `start_time` (the caller sets its hash): a strict
-- job in its partition, a fair task in its tenant's queues in the lane of its name
-- (`lane`), where a critical task handed back (`first`) goes to the head of its list.
local function queue_ready(id, kind, tenant, lane, priority, start_time, first)
  if kind == 'job' then return queue_strict(id) end
  if priority == CRITICAL then
    append(first and 'LPUSH' or 'RPUSH', critical_key(tenant, lane), id)
  else
    append('ZADD', normal_key(tenant, priority, lane), start_time, id)
  end
  if ready_order == nil then
    if ready_lane == nil then ready_lane, ready_tenant, ready_entry = lane, tenant, 0 end
    if lane == ready_lane and tenant == ready_tenant then
      ready_entry = entry_with(ready_entry, priority)
      return
    end
    ready_added, ready_order = {[ready_lane] = {[ready_tenant] = ready_entry}}, {ready_lane, ready_tenant}
  end
  local added = ready_added[lane]
  if added == nil then
    added = {}
    ready_added[lane] = added
  end
  local entry = added[tenant]
  if entry == nil then
    entry = 0
    ready_order[#ready_order + 1], ready_order[#ready_order + 2] = lane, tenant
  end
  added[tenant] = entry_with(entry, priority)
end

-- The ring, the ready entries, the running counts and the tenants' counters are written
-- for every tenant a call serves: a pop that reaches WIDE tenants or more, or a ring that
-- grows to WIDE tenants, takes them out of their listpacks (see leave_listpack).
local WIDE = 8
local function unpack_tenant_keys(lane)
  leave_listpack(lane_key(lane, 'ring'), 'zset')
  leave_listpack(lane_key(lane, 'ready'), 'zset')
  leave_listpack(K['ready:tenants'], 'zset')
  leave_listpack(K.running, 'hash')
  leave_listpack(K['stats:tenants'], 'hash')
end

-- Lanes where a tenant may now be served: their workers are woken at the call's end.
local woken, woken_order = nil, nil
local function lane_servable(lane)
  if woken == nil then woken, woken_order = {}, {} end
  if not woken[lane] then
    woken[lane] = true
    woken_order[#woken_order + 1] = lane
  end
end

-- Idle workers wait for a token of their lanes, or until work comes due as their upkeep
-- found it before the wait (queue/upkeep.lua); K['wakeups:until'] holds the end of the
-- latest wait begun (a time gone by wakes no one). Work added that comes due before then (a delayed
-- task, a retry's backoff, a task handed over, a rate window) wakes the workers of its
-- lane at the call's end, so that one looks again at when to wake: a wake-up that finds
-- nothing ready yet, which its pop takes away (pop.lua). One GET for each such task until
-- its lane is to wake (kept in no per-call variable: a script's main function may reach
-- at most 60 variables outside it, and finish_pop's is at that bound).
local function due_in_lane(lane, when)
  if woken and woken[lane] then return end -- its workers wake at this call's end anyway
  if when < tonumber(redis.call('GET', K['wakeups:until']) or 0) then lane_servable(lane) end
end

-- Puts `tenant` where its ready counts and shares say: in the ring of each lane where it
-- has ready tasks (joining at the back where it was not), asleep until its rate window
-- opens, or in no ring (no ready work, paused, at its concurrency limit). Returns true if
-- it is in a ring.
local function place(tenant, now)
  local lanes = redis.call('SMEMBERS', lanes_of_key(tenant))
  local s = shares_of(tenant)
  local room, opens = 1, nil
  if #lanes > 0 then room, opens = start_room(tenant, s, now) end
  if s then
    if opens then
      redis.call('ZADD', K.sleeping, opens, tenant)
      note_due(opens, now)
      for _, lane in ipairs(lanes) do due_in_lane(lane, opens) end
    else
      redis.call('ZREM', K.sleeping, tenant)
    end
  end
  if #lanes == 0 then
    if s and s.weight > 1 then redis.call('HDEL', K.turns, tenant) end
    return false
  end
  local tick = room > 0 and next_tick(now)
  for _, lane in ipairs(lanes) do
    if tick then
      redis.call('ZADD', lane_key(lane, 'ring'), 'NX', tick, tenant)
      lane_servable(lane)
    else
      redis.call('ZREM', lane_key(lane, 'ring'), tenant)
    end
  end
  return room > 0
end

-- A lane's wake-up token holds one element while a tenant may be served in the lane,
-- none otherwise. A worker on one server waits in BLPOP on the tokens of its names' lanes
-- with its pop pipelined behind (FairQueue.pop's `wait`): the pop runs as soon as a token
-- comes, with no round trip after the wake-up. A pop takes the token away or passes it
-- on (see pop.lua), so waiting workers wake one after another while work is left, and at
-- most one wake-up finds nothing. `wakeups:any` is the token of a pop that names no task
-- names (any lane).
local function signal_ready(token)
  if redis.call('LLEN', token) == 0 then redis.call('RPUSH', token, 1) end
end

-- Idle workers wait on the tokens above, or on `wake` (sharded pub/sub: on a cluster the
-- message stays within the shard of the namespace; it names the lane); both are given
-- only where a tenant may be served.
local function wake_workers()
  if woken_order == nil then return end
  for _, lane in ipairs(woken_order) do
    redis.call('SPUBLISH', PREFIX .. 'wake', lane)
    signal_ready(lane_key(lane, 'wakeups'))
  end
  signal_ready(K['wakeups:any'])
  woken, woken_order = nil, nil
end

-- Writes one lane and tenant's ready entry of this call (`entry`: count * LEVELS + the
-- levels added to), and the ring if the tenant came back to the lane (it joins at the
-- back). Returns the count added.
local function flush_ready_entry(lane, tenant, entry, now)
  local added, added_levels = split_ready(entry)
  local lane_ready = lane_key(lane, 'ready')
  local ready, levels = split_ready(redis.call('ZINCRBY', lane_ready, added * LEVELS, tenant))
  local missing = bit.band(added_levels, bit.bnot(levels))
  if missing ~= 0 then redis.call('ZINCRBY', lane_ready, missing, tenant) end
  redis.call('ZINCRBY', K['ready:tenants'], added, tenant)
  -- Only a tenant that had no ready task in the lane can change what its workers may
  -- serve: one that had some is in its ring already (or held by its shares, which this
  -- does not change), and workers were woken when it came in.
  if ready == added then
    redis.call('SADD', lanes_of_key(tenant), lane)
    redis.call('SADD', K.lanes, lane)
    if not shares_of(tenant) then
      local ring = lane_key(lane, 'ring')
      -- A ring as wide as a wide pop's leaves its listpacks as that pop would: pops of
      -- one task each never reach WIDE tenants, yet pay a scan of them per write.
      if redis.call('ZADD', ring, 'NX', next_tick(now), tenant) == 1
        and redis.call('ZCARD', ring) == WIDE then
        unpack_tenant_keys(lane)
      end
      lane_servable(lane)
    else
      place(tenant, now)
    end
  end
  return added
end

-- Writes the queued ids, the ready entries, and the rings for tenants that came back to
-- a lane, and wakes idle workers if any of those may be served now.
local function flush_ready(now)
  flush_appends()
  if ready_lane == nil then
    wake_workers() -- for work due before idle workers would look again (due_in_lane)
    return
  end
  local total
  if ready_order == nil then
    total = flush_ready_entry(ready_lane, ready_tenant, ready_entry, now)
  else
    total = 0
    for i = 1, #ready_order, 2 do
      local lane, tenant = ready_order[i], ready_order[i + 1]
      total = total + flush_ready_entry(lane, tenant, ready_added[lane][tenant], now)
    end
  end
  redis.call('INCRBY', K['ready:total'], total)
  wake_workers()
  ready_added, ready_order, ready_lane = nil, nil, nil
end

-- A task name whose limits may let a task start again: its lane's workers wake, if its
-- ring holds a tenant.
local function name_servable(name)
  if redis.call('EXISTS', lane_key(name, 'ring')) == 1 then lane_servable(name) end
end

-- Leases of fair tasks that ended in this call, per tenant, and per task name with
-- limits; flush_running() takes them off K.running and K['names:running'] once, and lets
-- a tenant or name held by its concurrency limit back in.
local leases_ended, leases_ended_tenants = nil, nil
local names_ended, names_ended_order = nil, nil

-- A lease of a record of `kind` and task name `name` ended (finished, failed, retried,
-- expired, released, handed over). Only the fair policy's tasks count as running.
local function lease_ended(kind, tenant, name)
  if kind ~= 'task' or not tenant then return end
  if leases_ended == nil then leases_ended, leases_ended_tenants = {}, {} end
  if leases_ended[tenant] == nil then
    leases_ended[tenant] = 0
    leases_ended_tenants[#leases_ended_tenants + 1] = tenant
  end
  leases_ended[tenant] = leases_ended[tenant] + 1
  if limits_of(name) then
    if names_ended == nil then names_ended, names_ended_order = {}, {} end
    if names_ended[name] == nil then
      names_ended[name] = 0
      names_ended_order[#names_ended_order + 1] = name
    end
    names_ended[name] = names_ended[name] + 1
  end
end

-- Takes the leases that ended in this call off K.running (and K['names:running']); a
-- tenant that its concurrency limit held comes back into its rings at once, and the
-- workers of a name its limit held wake.
local function flush_running(now)
  if leases_ended_tenants == nil then return end
  for _, tenant in ipairs(leases_ended_tenants) do
    if redis.call('HINCRBY', K.running, tenant, -leases_ended[tenant]) <= 0 then
      redis.call('HDEL', K.running, tenant)
    end
    local s = shares_of(tenant)
    if s and s.concurrency > 0 then place(tenant, now) end
  end
  if names_ended_order ~= nil then
    for _, name in ipairs(names_ended_order) do
      if redis.call('HINCRBY', K['names:running'], name, -names_ended[name]) <= 0 then
        redis.call('HDEL', K['names:running'], name)
      end
      if limits_of(name).concurrency > 0 then name_servable(name) end
    end
  end
  wake_workers()
  leases_ended, leases_ended_tenants, names_ended, names_ended_order = nil, nil, nil, nil
end

-- Tenants whose rate window opened come back into their rings, and the workers of task
-- names whose window opened wake (at most `limit` in all).
local function wake_sleepers(now, limit)
  local due = redis.call('ZRANGEBYSCORE', K.sleeping, '-inf', now, 'LIMIT', 0, limit)
  if #due == 0 then return 0 end
  redis.call('ZREM', K.sleeping, unpack(due))
  for _, sleeper in ipairs(due) do
    if string.sub(sleeper, 1, 1) == NAME_SLEEPER then
      name_servable(string.sub(sleeper, 2))
    else
      place(sleeper, now)
    end
  end
  wake_workers()
  return #due
end

-- `tenant` has `taken` ready tasks fewer over all lanes; returns how many it has left.
local function ready_taken(tenant, taken)
  local left = tonumber(redis.call('ZINCRBY', K['ready:tenants'], -taken, tenant))
  if left <= 0 then redis.call('ZREM', K['ready:tenants'], tenant) end
  return left
end

-- `tenant` has no ready task left in `lane`.
local function leave_lane(tenant, lane)
  redis.call('ZREM', lane_key(lane, 'ready'), tenant)
  redis.call('ZREM', lane_key(lane, 'ring'), tenant)
  redis.call('SREM', lanes_of_key(tenant), lane)
  if redis.call('EXISTS', lane_key(lane, 'ready')) == 0 then redis.call('SREM', K.lanes, lane) end
end

-- One ready task of `tenant` left its queues in `lane` outside a pop (cancel).
local function release_ready(tenant, lane)
  redis.call('DECR', K['ready:total'])
  ready_taken(tenant, 1)
  local ready = split_ready(redis.call('ZINCRBY', lane_key(lane, 'ready'), -LEVELS, tenant))
  if ready <= 0 then
    leave_lane(tenant, lane)
    place(tenant, clock_now())
  end
end

-- Removes a queued task from its tenant queue (cancel); returns true if it was there.
local function unqueue(id, kind, tenant, lane, priority)
  if kind == 'job' then return unqueue_strict(id) end
  local removed
  if priority == CRITICAL then
    removed = redis.call('LREM', critical_key(tenant, lane), 1, id)
  else
    removed = redis.call('ZREM', normal_key(tenant, priority, lane), id)
  end
  if removed == 1 then release_ready(tenant, lane) end
  return removed == 1
end
