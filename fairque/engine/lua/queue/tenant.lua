-- queue/tenant: read or change a tenant's shares (include/shares.lua): weight,
-- concurrency limit, rate limit and paused flag. A change applies at once: the tenant
-- leaves or rejoins the ring as its new shares say, keeping its place if it stays.
-- KEYS: shares running sleeping turns clock ready:tenants wakeups:any
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the operation: 'get', 'set' or 'list'
-- ARGV[3..] its arguments:
--   'get' tenant
--   'set' tenant, n, then n times: a field's name, its value ('' keeps it), its lowest
--         and highest value (fairque/queue/shares.py's table; period in us, paused 0/1)
--   'list' cursor, count: a page of at most count tenants whose shares are not all
--         defaults
-- Returns, for 'get' and 'set', the tenant's row (shares_row in include/ready.lua); for
-- 'list', {next cursor, tenant, row, tenant, row...}.
--@include ready

local now = clock_now()

-- The reply, once the tick clock (moved by a tenant rejoining the ring) is saved.
local function done(reply)
  if last_tick ~= nil then redis.call('SET', K.clock, last_tick) end
  return reply
end

local op = ARGV[2]
if op == 'list' then
  -- HSCAN's COUNT is a hint (a small hash comes whole), so a page takes at most `count`
  -- of its batches' entries: the cursor is HSCAN's times SPLIT plus the entries of that
  -- batch already given. A page fills from the batches after it too.
  local SPLIT = 1048576
  local count = tonumber(ARGV[4])
  local scan_cursor = math.floor(tonumber(ARGV[3]) / SPLIT)
  local skip = tonumber(ARGV[3]) % SPLIT
  local reply, given = {0}, 0
  repeat
    local scan = redis.call('HSCAN', K.shares, string.format('%d', scan_cursor), 'COUNT', count)
    local entries = scan[2]
    local at = 2 * skip + 1
    while at < #entries and given < count do
      reply[#reply + 1] = entries[at]
      reply[#reply + 1] = shares_row(entries[at])
      given, at = given + 1, at + 2
    end
    if at < #entries then -- the page is full inside this batch
      reply[1] = scan_cursor * SPLIT + (at - 1) / 2
      break
    end
    scan_cursor, skip = tonumber(scan[1]), 0
    reply[1] = scan_cursor * SPLIT
  until scan_cursor == 0 or given >= count
  return done(reply)
end
local tenant = ARGV[3]
if tenant == nil or tenant == '' then return redis.error_reply('INVALID user_id is empty') end
if op == 'get' then return done(shares_row(tenant)) end
if op ~= 'set' then return redis.error_reply('INVALID op unknown operation ' .. tostring(op)) end

if tonumber(ARGV[4]) ~= #SHARE_FIELDS then
  return redis.error_reply('INVALID shares a change names ' .. #SHARE_FIELDS .. ' fields, got ' ..
    tostring(ARGV[4]))
end
local current = shares_of(tenant) or DEFAULT_SHARES
local new, stored, default = {}, {}, true
for i, field in ipairs(SHARE_FIELDS) do
  local at = 4 * i + 1
  local name, given = ARGV[at], ARGV[at + 1]
  local low, high = tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
  if name ~= field or low == nil or high == nil then
    return redis.error_reply('INVALID shares field ' .. i .. ' is ' .. field .. ', got ' ..
      tostring(name))
  end
  if given == '' then
    new[field] = current[field]
  else
    local value = tonumber(given)
    if value == nil or value ~= math.floor(value) or value < low or value > high then
      return redis.error_reply('INVALID ' .. field .. ' must be a whole number from ' ..
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
for i, field in ipairs(SHARE_FIELDS) do
  stored[i] = string.format('%d', new[field])
  if new[field] ~= DEFAULT_SHARES[field] then default = false end
end
if default then
  redis.call('HDEL', K.shares, tenant)
else
  redis.call('HSET', K.shares, tenant, table.concat(stored, ' '))
end
if new.weight ~= current.weight then
  -- At once, mid-turn too: the tasks the turn has given count against the new weight.
  -- A turn already past it ends now (to the back of the ring); one that may go on
  -- keeps its place with what is left of the new weight.
  local left = tonumber(redis.call('HGET', K.turns, tenant))
  local given = left and current.weight - left or 0
  if new.weight - given <= 0 then
    redis.call('HDEL', K.turns, tenant)
    local tick = next_tick(now)
    for _, lane in ipairs(redis.call('SMEMBERS', lanes_of_key(tenant))) do
      redis.call('ZADD', lane_key(lane, 'ring'), 'XX', tick, tenant)
    end
  elseif given > 0 then
    redis.call('HSET', K.turns, tenant, new.weight - given)
  else
    redis.call('HDEL', K.turns, tenant)
  end
end
if shares_read then shares_read[tenant] = nil end
any_shares = nil
redis.call('ZREM', K.sleeping, tenant)
place(tenant, now)
wake_workers()
return done(shares_row(tenant))
