-- pop: lease up to `count` ready tasks by the fair policy (design section 5).
--
-- Round robin is simulated inside the call on the tenants it can reach (the first
-- `count` of the ring, or the named ones), then written back once: the result is the
-- same as popping one task at a time.
-- KEYS: ring ready scheduled leases stats clock state:finished state:failed state:canceled strict:partitions constraints settings running shares sleeping turns ready:total stats:tenants wakeups
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the worker id
-- ARGV[3] count
-- ARGV[4] lease seconds ('' = each task's timeout)
-- ARGV[5] 1 when the worker names tenants, else 0 and nothing follows
-- ARGV[6..] the number of assigned tenants, those, the number of steal targets, those
-- Returns, per leased task: id, tenant, priority, name, payload, attempts, lease deadline
-- (us), lease token, timeout, max_retries, created_at, start_time, prev_start_time,
-- headers ('' for none, else MessagePack).
--@include maintenance

local MANY_LEASES = 16

local worker_id = ARGV[2]
local wanted = tonumber(ARGV[3])
local lease_seconds = tonumber(ARGV[4])
local assigned, steal = nil, nil
if ARGV[5] == '1' then
  local n = tonumber(ARGV[6])
  assigned = {unpack(ARGV, 7, 6 + n)}
  local m = tonumber(ARGV[7 + n])
  steal = {unpack(ARGV, 8 + n, 7 + n + m)}
end

local now = clock_now()
-- Housekeeping rides along with every pop, so a lone worker needs no separate reaper.
-- The maintenance batch is read only when something is due (maintenance.lua).
reap_expired(now)
promote_due(now)
flush_ready(now)
flush_running(now)

-- `candidates` that are in the ring, least recently served first.
local function in_ring_order(candidates, skip)
  local fresh = {}
  for _, tenant in ipairs(candidates) do
    if not skip[tenant] then fresh[#fresh + 1] = tenant; skip[tenant] = true end
  end
  if #fresh == 0 then return {} end
  local scores = redis.call('ZMSCORE', K.ring, unpack(fresh))
  local present = {}
  for i, tenant in ipairs(fresh) do
    if scores[i] then present[#present + 1] = {tonumber(scores[i]), tenant} end
  end
  table.sort(present, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
  local ordered = {}
  for i, entry in ipairs(present) do ordered[i] = entry[2] end
  return ordered
end

-- Assigned tenants first, then steal targets (work stealing, seed 001); with neither,
-- the head of the global ring: `wanted` serves never reach past its first `wanted`.
local groups
if assigned == nil then
  groups = {redis.call('ZRANGE', K.ring, 0, wanted - 1)}
else
  local skip = {}
  groups = {in_ring_order(assigned, skip), in_ring_order(steal, skip)}
end

-- No tenant to serve (an idle worker's pop): it ends here, before the tables and
-- closures serving needs. The wake-up token follows the ring, as at the end below.
if #groups[1] == 0 and (groups[2] == nil or #groups[2] == 0) then
  if assigned ~= nil and redis.call('EXISTS', K.ring) == 1 then
    signal_ready()
  else -- an empty head of the ring: the ring is empty
    redis.call('DEL', K.wakeups)
  end
  return flush(now, {})
end

-- Per tenant: ready tasks left, and before this call, levels mask, tick of its last
-- serve; and the tenants this call looked at.
local remaining, before, mask, served_tick, touched = {}, {}, {}, {}, {}

local function drop_level(tenant, priority)
  mask[tenant] = bit.band(mask[tenant], bit.bnot(level_bit(priority)))
end

-- The queues a levels mask names, the critical list first, then normal priorities from
-- 5 down to 1: made once per mask value seen in this call (there are at most 64), not
-- once per task taken.
local mask_levels = {}
local function levels_of(m)
  local levels = mask_levels[m]
  if levels == nil then
    levels = {}
    for _, priority in ipairs({CRITICAL, 5, 4, 3, 2, 1}) do
      if bit.band(m, level_bit(priority)) ~= 0 then levels[#levels + 1] = priority end
    end
    mask_levels[m] = levels
  end
  return levels
end

-- Removes and returns the next task id of `tenant`: the critical head (FIFO), else the
-- normal head with the highest urgency (p / 5) * (now - ready time); ties go to the
-- higher priority, then to the older task. Only queues in the tenant's mask are asked.
local function take_task(tenant)
  local levels = levels_of(mask[tenant])
  if levels[1] == CRITICAL then
    local id = redis.call('LPOP', critical_key(tenant))
    if id then return id end
    drop_level(tenant, CRITICAL)
    levels = levels_of(mask[tenant])
  end
  if #levels == 1 then
    local popped = redis.call('ZPOPMIN', normal_key(tenant, levels[1]))
    if popped[1] then return popped[1] end
    drop_level(tenant, levels[1])
    return nil
  end
  local best_id, best_priority, best_urgency = nil, nil, nil
  for _, priority in ipairs(levels) do
    local head = redis.call('ZRANGE', normal_key(tenant, priority), 0, 0, 'WITHSCORES')
    if head[1] then
      local waited = math.max(0, now - tonumber(head[2]))
      local urgency = priority / 5 * waited
      if best_urgency == nil or urgency > best_urgency then
        best_id, best_priority, best_urgency = head[1], priority, urgency
      end
    else
      drop_level(tenant, priority)
    end
  end
  if best_id then redis.call('ZREM', normal_key(tenant, best_priority), best_id) end
  return best_id
end

local leased, taken = {}, 0
-- Per tenant: how many more it may start in this call (its shares' room), what is left
-- of its turn (a tenant of weight w takes w tasks in a row before moving to the back:
-- weighted round robin), and the lease tokens of its starts.
local room, turn_left, weight, tokens = {}, {}, {}, {}

local function lease(id, tenant)
  local key = task_key(id)
  local f = redis.call('HMGET', key, 'priority', 'name', 'payload', 'attempts', 'timeout',
    'max_retries', 'created_at', 'start_time', 'prev_start_time', 'headers')
  local deadline = now + math.floor((lease_seconds or tonumber(f[5])) * MICROS)
  local token = next_tick(now)
  append('ZADD', K.leases, deadline, id)
  redis.call('HSET', key, 'state', 'started', 'leased_at', now, 'lease_deadline', deadline,
    'lease_token', token, 'worker_id', worker_id)
  local row = #leased
  leased[row + 1], leased[row + 2], leased[row + 3], leased[row + 4] = id, tenant, f[1], f[2] or ''
  leased[row + 5], leased[row + 6], leased[row + 7], leased[row + 8] = f[3], f[4] or 0, deadline, token
  leased[row + 9], leased[row + 10], leased[row + 11] = f[5], f[6], f[7]
  leased[row + 12], leased[row + 13], leased[row + 14] = f[8], f[9] or '', f[10] or ''
  count('started')
  note_start(tenant, now - (tonumber(f[8]) or now))
  taken = taken + 1
  local started = tokens[tenant]
  started[#started + 1] = token
end

-- Reads what the tenants of `group` may take: their ready entries, shares and turns.
-- Returns those that may start a task now, in ring order.
local function open_group(group)
  local active = {}
  if #group == 0 then return active end
  local entries = redis.call('ZMSCORE', K.ready, unpack(group))
  read_shares(group)
  for i, tenant in ipairs(group) do
    remaining[tenant], mask[tenant] = split_ready(entries[i])
    before[tenant] = remaining[tenant]
    touched[#touched + 1] = tenant
    tokens[tenant] = {}
    local s = shares_read[tenant]
    room[tenant] = remaining[tenant] > 0 and start_room(tenant, s, now) or 0
    weight[tenant] = s and s.weight or 1
    turn_left[tenant] = weight[tenant]
    if weight[tenant] > 1 then
      turn_left[tenant] = tonumber(redis.call('HGET', K.turns, tenant)) or weight[tenant]
    end
    if remaining[tenant] > 0 and room[tenant] > 0 then active[#active + 1] = tenant end
  end
  return active
end

for _, group in ipairs(groups) do
  if taken >= wanted then break end
  local active = open_group(group)
  while taken < wanted and #active > 0 do
    local still = {}
    for _, tenant in ipairs(active) do
      if taken >= wanted then break end
      repeat
        local id = take_task(tenant)
        if id then
          lease(id, tenant)
          remaining[tenant] = remaining[tenant] - 1
          room[tenant] = room[tenant] - 1
          turn_left[tenant] = turn_left[tenant] - 1
        else
          remaining[tenant] = 0  -- a count without queued ids: repair the invariant
        end
      until taken >= wanted or remaining[tenant] == 0 or room[tenant] == 0
        or turn_left[tenant] == 0
      if turn_left[tenant] == 0 then -- its turn is over: to the back of the ring
        served_tick[tenant] = next_tick(now)
        turn_left[tenant] = weight[tenant]
      end
      if remaining[tenant] > 0 and room[tenant] > 0 then still[#still + 1] = tenant end
    end
    active = still
  end
end

-- Write back: starts to K.running (and the rate logs), ready counts, ring positions.
-- Served tenants whose turn ended move to the back in the order of their last serve;
-- one inside its turn keeps its place; one its shares now hold, and one left without
-- ready work, leave the ring.
if #touched >= WIDE then unpack_tenant_keys() end
local entries_left, gone, moves, held, left_ready = {}, {}, {}, {}, 0
for _, tenant in ipairs(touched) do
  local started = #tokens[tenant]
  left_ready = left_ready + before[tenant] - math.max(remaining[tenant], 0)
  if started > 0 then
    redis.call('HINCRBY', K.running, tenant, started)
    record_starts(tenant, shares_read[tenant], now, tokens[tenant])
  end
  if remaining[tenant] <= 0 then
    gone[#gone + 1] = tenant
  else
    if started > 0 then
      entries_left[#entries_left + 1] = remaining[tenant] * LEVELS + mask[tenant]
      entries_left[#entries_left + 1] = tenant
    end
    if room[tenant] <= 0 then
      held[#held + 1] = tenant
    elseif served_tick[tenant] then
      moves[#moves + 1] = served_tick[tenant]
      moves[#moves + 1] = tenant
    end
    if weight[tenant] > 1 then
      if turn_left[tenant] < weight[tenant] and room[tenant] > 0 then
        redis.call('HSET', K.turns, tenant, turn_left[tenant])
      else
        redis.call('HDEL', K.turns, tenant)
      end
    end
  end
end
if #entries_left > 0 then call_chunked('ZADD', K.ready, entries_left) end
if left_ready > 0 then redis.call('DECRBY', K['ready:total'], left_ready) end
if #moves > 0 then redis.call('ZADD', K.ring, 'XX', unpack(moves)) end
for _, tenant in ipairs(held) do place(tenant, now) end
if #gone > 0 then
  call_chunked('ZREM', K.ready, gone)
  call_chunked('ZREM', K.ring, gone)
  for _, tenant in ipairs(gone) do
    if weight[tenant] > 1 then redis.call('HDEL', K.turns, tenant) end
  end
end
-- The wake-up token follows the ring: kept (or given) while a tenant may be served, so
-- the next waiting worker wakes; taken away once none may.
if redis.call('EXISTS', K.ring) == 1 then signal_ready() else redis.call('DEL', K.wakeups) end
-- The leases get a member for each task taken, which finish and the reaper take off
-- one by one: in a listpack (under 128 members) each of those writes scans it, so a pop
-- of many makes it a skiplist before adding them (~90 bytes more per lease in flight).
if taken >= MANY_LEASES then flush_into_skiplist(K.leases) end
return flush(now, leased)
