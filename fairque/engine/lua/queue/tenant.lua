-- queue/tenant: read or change a tenant's shares (include/shares.lua): weight,
-- concurrency limit, rate limit and paused flag. A change applies at once: the tenant
-- leaves or rejoins the ring as its new shares say, keeping its place if it stays.
-- KEYS: ring ready shares running sleeping turns clock wakeups
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the operation: 'get', 'set' or 'list'
-- ARGV[3..] its arguments:
--   'get' tenant
--   'set' tenant, weight, concurrency, rate, period (us), paused (0/1); '' keeps a value
--   'list' cursor, count: a page of the tenants whose shares are not all defaults
-- Returns, for 'get' and 'set', the tenant's row (shares_row in include/ready.lua); for
-- 'list', {next cursor, tenant, row, tenant, row...}.
--@include ready

-- Bounds, the same as fairque/queue/models.py's TenantShares.
local MAX = {weight = 1000, concurrency = 1000000, rate = 10000, period = 86400 * MICROS}
local FIELDS = {'weight', 'concurrency', 'rate', 'period', 'paused'}

local now = clock_now()

-- The reply, once the tick clock (moved by a tenant rejoining the ring) is saved.
local function done(reply)
  if last_tick ~= nil then redis.call('SET', K.clock, last_tick) end
  return reply
end

local op = ARGV[2]
if op == 'list' then
  local scan = redis.call('HSCAN', K.shares, ARGV[3], 'COUNT', tonumber(ARGV[4]))
  local reply = {scan[1]}
  for i = 1, #scan[2], 2 do
    reply[#reply + 1] = scan[2][i]
    reply[#reply + 1] = shares_row(scan[2][i])
  end
  return done(reply)
end
local tenant = ARGV[3]
if tenant == nil or tenant == '' then return redis.error_reply('INVALID user_id is empty') end
if op == 'get' then return done(shares_row(tenant)) end
if op ~= 'set' then return redis.error_reply('INVALID op unknown operation ' .. tostring(op)) end

local current = shares_of(tenant) or {weight = 1, concurrency = 0, rate = 0, period = 0,
  paused = false}
local new = {}
for i, field in ipairs(FIELDS) do
  local given = ARGV[3 + i]
  if given == '' or given == nil then
    new[field] = current[field]
    if field == 'paused' then new[field] = current.paused and 1 or 0 end
  else
    local value = tonumber(given)
    local top = MAX[field] or 1
    if value == nil or value ~= math.floor(value) or value < 0 or value > top then
      return redis.error_reply('INVALID ' .. field .. ' must be a whole number from 0 to ' ..
        int(top) .. ', got ' .. given)
    end
    new[field] = value
  end
end
if new.weight < 1 then return redis.error_reply('INVALID weight must be at least 1') end
if new.rate == 0 then
  new.period = 0
elseif new.period == 0 then -- a rate given without a period ever set: starts per second
  new.period = MICROS
end
if new.weight == 1 and new.concurrency == 0 and new.rate == 0 and new.paused == 0 then
  redis.call('HDEL', K.shares, tenant)
else
  redis.call('HSET', K.shares, tenant, string.format('%d %d %d %d %d', new.weight,
    new.concurrency, new.rate, new.period, new.paused))
end
if new.weight ~= current.weight then redis.call('HDEL', K.turns, tenant) end
if shares_read then shares_read[tenant] = nil end
any_shares = nil
redis.call('ZREM', K.sleeping, tenant)
if place(tenant, now) then wake_workers(1) end
return done(shares_row(tenant))
