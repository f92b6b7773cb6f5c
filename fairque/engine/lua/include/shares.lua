-- Tunable shares (design section 5.5): per tenant a weight, a concurrency limit, a rate
-- limit and a paused flag. K.shares holds, for each tenant with a setting other than the
-- default, 'weight concurrency rate period paused' (period in us; 0 = no such limit).
--
-- A tenant held by a limit or paused is out of the ring, so a pop never scans held
-- tenants: ready.lua's place() puts a tenant where its state says, whenever that state
-- may have changed. K.running counts each tenant's STARTED fair tasks (every path that
-- ends a lease takes it down, see ready.lua's lease_ended); K.sleeping holds tenants
-- whose rate window is full, scored by when it opens; K.turns holds what is left of a
-- weighted tenant's turn when a pop ended inside it.
--
-- Limits per task name take the same fields (the weight unused), in K.shares too, under
-- NAME_FIELD .. name (so one HLEN per call says whether any tenant or name has a setting),
-- and K['names:running'] the STARTED tasks of those names
-- (counted from when a limit is set: queue/limits.lua counts the running ones then). A
-- name held by a limit keeps its lane's ring but a pop takes nothing from it, and its
-- wake-up token is taken away until a lease of the name ends (flush_running) or its
-- rate window opens (K.sleeping holds the name as NAME_SLEEPER .. name).
--@include base

-- A rate-limited tenant's recent starts (a sliding log, like a strict constraint's):
-- member = the lease token (unique), score = start time (us).
local function tenant_starts_key(tenant) return PREFIX .. 'queue:user:' .. tenant .. ':starts' end
-- A rate-limited task name's recent starts, the same way.
local function name_starts_key(name) return lane_key(name, 'starts') end
-- A task name's field in K.shares and its member in K.sleeping: tenant ids hold no control
-- character, so this one tells the two apart.
local NAME_FIELD = '\1'
local NAME_SLEEPER = NAME_FIELD

-- A tenant's settings in the order K.shares keeps them, and a task name's (its limits,
-- then its tasks' defaults): fairque/engine/fields.py's tables, whose names (and bounds)
-- every change carries, so the two cannot drift apart.
local SHARE_FIELDS, DEFAULT_SHARES = TENANT_SHARES.FIELDS, TENANT_SHARES.DEFAULTS
local LIMIT_FIELDS, DEFAULT_LIMITS = NAME_LIMITS.FIELDS, NAME_LIMITS.DEFAULTS
-- A name's tasks' defaults, stored apart (K['names:defaults']): releases before them read
-- every row of K.shares, and would refuse one with fields they do not know.
local TASK_FIELDS, TASK_DEFAULTS = NAME_DEFAULTS.FIELDS, NAME_DEFAULTS.DEFAULTS

-- Shares read in this call: tenant -> {weight, concurrency, rate, period, paused}, or
-- false for a tenant with every default.
local shares_read = nil

-- The settings stored as `raw` (of `fields`, else a tenant's): a field past the end of
-- what was stored (one added since) reads as its default.
local function parse_shares(raw, fields, defaults)
  if not raw then return false end
  fields, defaults = fields or SHARE_FIELDS, defaults or DEFAULT_SHARES
  local s, i = {}, 0
  for word in string.gmatch(raw, '%S+') do
    i = i + 1
    s[fields[i]] = tonumber(word)
  end
  for j = i + 1, #fields do s[fields[j]] = defaults[fields[j]] end
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

-- Forgets what this call read of `tenant`'s shares, after a change of them.
local function forget_shares(tenant)
  if shares_read then shares_read[tenant] = nil end
  any_shares = nil
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

-- Limits of task names read in this call: name -> shares (as a tenant's), or false.
local names_read = nil

-- The limits of task name `name`, or false (none, or an unnamed task's lane ''): nothing
-- more than the call's HLEN while neither a tenant nor a name has a setting.
local function limits_of(name)
  if not name or name == '' or not shares_exist() then return false end
  if names_read == nil then names_read = {} end
  local s = names_read[name]
  if s == nil then
    s = parse_shares(redis.call('HGET', K.shares, NAME_FIELD .. name), LIMIT_FIELDS, DEFAULT_LIMITS)
    names_read[name] = s
  end
  return s
end

-- The defaults of task name `name`'s tasks (queue/limits.lua), or false: nothing more
-- than one HLEN per call while no name has any.
local defaults_read, any_defaults = nil, nil
local function defaults_exist()
  if any_defaults == nil then any_defaults = redis.call('HLEN', K['names:defaults']) > 0 end
  return any_defaults
end

-- Whether `key` exists, asking in the same EXISTS whether any name has defaults (a push
-- asks both: one command instead of two, ~3k instructions less for one task). Only
-- where the two answers cannot be told apart (one of the two exists) does it ask again.
local function exists_noting_defaults(key)
  local found = redis.call('EXISTS', key, K['names:defaults'])
  if found ~= 1 then
    any_defaults = found == 2
    return any_defaults
  end
  any_defaults = redis.call('EXISTS', K['names:defaults']) == 1
  return not any_defaults
end

local function defaults_of(name)
  if not name or name == '' or not defaults_exist() then return false end
  if defaults_read == nil then defaults_read = {} end
  local d = defaults_read[name]
  if d == nil then
    d = parse_shares(redis.call('HGET', K['names:defaults'], name), TASK_FIELDS, TASK_DEFAULTS)
    defaults_read[name] = d
  end
  return d
end

-- A pop of a task asks both whether anyone has shares or limits and whether a task name
-- has defaults: one EXISTS of the two hashes answers both when neither has any (the
-- common case), where their HLENs were two commands (~4k instructions more).
local function settings_held()
  if any_shares == nil and any_defaults == nil
    and redis.call('EXISTS', K.shares, K['names:defaults']) == 0 then
    any_shares, any_defaults = false, false
  end
end

-- Forgets what this call read of task name `name`'s limits and defaults, after a change
-- of them.
local function forget_limits(name)
  if names_read then names_read[name] = nil end
  if defaults_read then defaults_read[name] = nil end
  any_shares, any_defaults = nil, nil
end

-- How many more starts the rate window of shares `s` allows now (its log of starts is
-- `key`), and when it opens again (us) if it allows none.
local function window_room(key, s, now)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - s.period)
  local room = s.rate - redis.call('ZCARD', key)
  if room > 0 then return room, nil end
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return 0, tonumber(oldest[2]) + s.period
end

-- How many tasks a holder of shares `s` may start now (math.huge: no limit), and when
-- its rate window opens if that is what holds it: its running count is `member`'s in
-- hash `running_hash`, its log of starts `starts_log`.
local function room_under(s, running_hash, member, starts_log, now)
  if s.paused == 1 then return 0, nil end
  local room = math.huge
  if s.concurrency > 0 then
    room = s.concurrency - tonumber(redis.call('HGET', running_hash, member) or 0)
  end
  if room > 0 and s.rate > 0 then
    local window, opens = window_room(starts_log, s, now)
    if opens then return 0, opens end
    room = math.min(room, window)
  end
  return math.max(room, 0), nil
end

-- The same for a tenant with shares `s` (none: no limit).
local function start_room(tenant, s, now)
  if not s then return math.huge, nil end
  return room_under(s, K.running, tenant, tenant_starts_key(tenant), now)
end

-- The same for task name `name` with limits `s`.
local function name_room(name, s, now)
  return room_under(s, K['names:running'], name, name_starts_key(name), now)
end

-- Records starts under rate-limited shares `s` in the log `key` (the lease tokens of
-- this pop); the log expires with its window, so a holder that stops leaves nothing.
local function record_starts(key, s, now, tokens)
  if not s or s.rate == 0 or #tokens == 0 then return end
  local entries = {}
  for _, token in ipairs(tokens) do
    entries[#entries + 1] = now
    entries[#entries + 1] = token
  end
  call_chunked('ZADD', key, entries)
  redis.call('PEXPIRE', key, math.ceil(s.period / 1000))
end

-- A tenant's shares and where it stands: its SHARE_FIELDS in order (period in us, paused
-- 0/1), then running, ready, in a ring (0/1), when its rate window opens (us, or -1).
local function shares_row(tenant)
  local s = shares_of(tenant) or DEFAULT_SHARES
  local row = {}
  for i, field in ipairs(SHARE_FIELDS) do row[i] = s[field] end
  row[#row + 1] = running_of(tenant)
  row[#row + 1] = tonumber(redis.call('ZSCORE', K['ready:tenants'], tenant)) or 0
  local in_ring = 0
  for _, lane in ipairs(redis.call('SMEMBERS', lanes_of_key(tenant))) do
    if redis.call('ZSCORE', lane_key(lane, 'ring'), tenant) then in_ring = 1 end
  end
  row[#row + 1] = in_ring
  row[#row + 1] = tonumber(redis.call('ZSCORE', K.sleeping, tenant)) or -1
  return row
end

-- A change of shares as queue/tenant.lua and queue/limits.lua take it (ARGV[4..]: the
-- number of fields, then per field its name, its value ('' keeps `current`'s) and the
-- bounds it must lie within, as fairque/queue/shares.py's change_args sends them).
-- `fields` are a tenant's or a task name's. Returns the new settings; or nil and the
-- error reply.
local function read_change(current, fields)
  if tonumber(ARGV[4]) ~= #fields then
    return nil, redis.error_reply('INVALID shares a change names ' .. #fields ..
      ' fields, got ' .. tostring(ARGV[4]))
  end
  local new = {}
  for i, field in ipairs(fields) do
    local at = 4 * i + 1
    local name, given = ARGV[at], ARGV[at + 1]
    local low, high = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
    if name ~= field or low == nil or high == nil then
      return nil, redis.error_reply('INVALID shares field ' .. i .. ' is ' .. field ..
        ', got ' .. tostring(name))
    end
    if given == '' then
      new[field] = current[field]
    else
      local value = tonumber(given)
      if value == nil or value ~= math.floor(value) or value < low or value > high then
        return nil, redis.error_reply('INVALID ' .. field .. ' must be a whole number from ' ..
          int(low) .. ' to ' .. int(high) .. ', got ' .. given)
      end
      new[field] = value
    end
  end
  if new.rate == 0 then
    new.period = 0
  elseif new.period == 0 then -- a rate given without a period ever set: starts per second
    new.period = MICROS
  end
  return new
end

-- The stored form of settings `new`'s `fields` (a row of fairque/engine/fields.py), and
-- whether they are all `defaults`.
local function stored_form(new, fields, defaults)
  local stored, default = {}, true
  for i, field in ipairs(fields) do
    stored[i] = string.format('%d', new[field])
    if new[field] ~= defaults[field] then default = false end
  end
  return table.concat(stored, ' '), default
end

-- A page of the holders of settings in K.shares, tenants or (`names`) task names (ARGV[3]
-- the cursor, ARGV[4] how many): {next cursor, holder, row_of(holder), holder, row...}.
-- HSCAN's COUNT is a hint (a small hash comes whole), so a page takes at most `size` of
-- its batches' entries: the cursor is HSCAN's times SPLIT plus the entries of that batch
-- already looked at. A page fills from the batches after it too; the other kind's entries
-- are passed over, so a page may hold fewer.
local function shares_page(names, row_of)
  local SPLIT = 1048576
  local size = tonumber(ARGV[4])
  local scan_cursor = math.floor(tonumber(ARGV[3]) / SPLIT)
  local skip = tonumber(ARGV[3]) % SPLIT
  local reply, given = {0}, 0
  repeat
    local scan = redis.call('HSCAN', K.shares, string.format('%d', scan_cursor), 'COUNT', size)
    local entries = scan[2]
    local at = 2 * skip + 1
    while at < #entries and given < size do
      local field = entries[at]
      local is_name = string.sub(field, 1, 1) == NAME_FIELD
      if is_name == names then
        local holder = names and string.sub(field, 2) or field
        reply[#reply + 1] = holder
        reply[#reply + 1] = row_of(holder)
        given = given + 1
      end
      at = at + 2
    end
    if at < #entries then -- the page is full inside this batch
      reply[1] = scan_cursor * SPLIT + (at - 1) / 2
      break
    end
    scan_cursor, skip = tonumber(scan[1]), 0
    reply[1] = scan_cursor * SPLIT
  until scan_cursor == 0 or given >= size
  return reply
end
