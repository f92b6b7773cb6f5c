-- Tunable shares (design section 5.5): per tenant a weight, a concurrency limit, a rate
-- limit and a paused flag. K.shares holds, for each tenant with a setting other than the
-- default, 'weight concurrency rate period paused' (period in us; 0 = no such limit).
--
-- A tenant held by a limit or paused is out of the ring, so a pop never scans held
-- tenants: ready.lua's place() puts a tenant where its state says, whenever that state
-- may have changed. K.running counts each tenant's STARTED fair tasks (every path that
-- ends a lease takes it down, see lease_ended); K.sleeping holds tenants whose rate
-- window is full, scored by when it opens; K.turns holds what is left of a weighted
-- tenant's turn when a pop ended inside it.
--@include writes

-- A rate-limited tenant's recent starts (a sliding log, like a strict constraint's):
-- member = the lease token (unique), score = start time (us).
local function tenant_starts_key(tenant) return PREFIX .. 'queue:user:' .. tenant .. ':starts' end

-- A tenant's settings in the order K.shares keeps them: fairque/queue/shares.py's table,
-- whose names (and bounds) every change carries, so the two cannot drift apart.
local SHARE_FIELDS = {'weight', 'concurrency', 'rate', 'period', 'paused'}
local DEFAULT_SHARES = {weight = 1, concurrency = 0, rate = 0, period = 0, paused = 0}

-- Shares read in this call: tenant -> {weight, concurrency, rate, period, paused}, or
-- false for a tenant with every default.
local shares_read = nil

local function parse_shares(raw)
  if not raw then return false end
  local s, i = {}, 0
  for word in string.gmatch(raw, '%S+') do
    i = i + 1
    s[SHARE_FIELDS[i]] = tonumber(word)
  end
  return s
end

-- Whether any tenant has shares: when none has (the common case), a call asks nothing
-- more about shares, so tenants without them cost one HLEN per call.
local any_shares = nil
local function shares_exist()
  if any_shares == nil then any_shares = redis.call('HLEN', K.shares) > 0 end
  return any_shares
end

local function shares_of(tenant)
  if shares_read == nil then shares_read = {} end
  local s = shares_read[tenant]
  if s == nil then
    s = shares_exist() and parse_shares(redis.call('HGET', K.shares, tenant))
    shares_read[tenant] = s
  end
  return s
end

-- Reads the shares of `tenants` in one call (a pop's candidates).
local function read_shares(tenants)
  if #tenants == 0 then return end
  if shares_read == nil then shares_read = {} end
  if not shares_exist() then
    for _, tenant in ipairs(tenants) do shares_read[tenant] = false end
    return
  end
  local raw = redis.call('HMGET', K.shares, unpack(tenants))
  for i, tenant in ipairs(tenants) do shares_read[tenant] = parse_shares(raw[i]) end
end

local function running_of(tenant)
  return tonumber(redis.call('HGET', K.running, tenant) or 0)
end

-- How many more starts the rate window of a tenant with shares `s` allows now, and when
-- it opens again (us) if it allows none.
local function window_room(tenant, s, now)
  local key = tenant_starts_key(tenant)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - s.period)
  local room = s.rate - redis.call('ZCARD', key)
  if room > 0 then return room, nil end
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return 0, tonumber(oldest[2]) + s.period
end

-- How many tasks the tenant may start now (math.huge: no limit), and when its rate
-- window opens if that is what holds it.
local function start_room(tenant, s, now)
  if not s then return math.huge, nil end
  if s.paused == 1 then return 0, nil end
  local room = math.huge
  if s.concurrency > 0 then room = s.concurrency - running_of(tenant) end
  if room > 0 and s.rate > 0 then
    local window, opens = window_room(tenant, s, now)
    if opens then return 0, opens end
    room = math.min(room, window)
  end
  return math.max(room, 0), nil
end

-- Records starts of a rate-limited tenant (the lease tokens of this pop); the log expires
-- with its window, so a tenant that stops leaves nothing behind.
local function record_starts(tenant, s, now, tokens)
  if not s or s.rate == 0 or #tokens == 0 then return end
  local key = tenant_starts_key(tenant)
  local entries = {}
  for _, token in ipairs(tokens) do
    entries[#entries + 1] = now
    entries[#entries + 1] = token
  end
  call_chunked('ZADD', key, entries)
  redis.call('PEXPIRE', key, math.ceil(s.period / 1000))
end

-- Leases of fair tasks that ended in this call, per tenant; flush_running() takes them
-- off K.running once, and lets a tenant held by its concurrency limit back in.
local leases_ended, leases_ended_tenants = nil, nil

-- A lease of a record of `kind` ended (finished, failed, retried, expired, released,
-- handed over). Only the fair policy's tasks count as running.
local function lease_ended(kind, tenant)
  if kind ~= 'task' or not tenant then return end
  if leases_ended == nil then leases_ended, leases_ended_tenants = {}, {} end
  if leases_ended[tenant] == nil then
    leases_ended[tenant] = 0
    leases_ended_tenants[#leases_ended_tenants + 1] = tenant
  end
  leases_ended[tenant] = leases_ended[tenant] + 1
end
