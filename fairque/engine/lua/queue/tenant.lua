-- queue/tenant: read or change a tenant's shares (include/shares.lua): weight,
-- concurrency limit, rate limit and paused flag. A change applies at once: the tenant
-- leaves or rejoins the ring as its new shares say, keeping its place if it stays.
-- KEYS: shares running sleeping turns clock ready:tenants wakeups:any wakeups:until maintenance:quiet stats stats:tenants
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the operation: 'get', 'set' or 'list'
-- ARGV[3..] its arguments:
--   'get' tenant
--   'set' tenant, n, then n times: a field's name, its value ('' keeps it), its lowest
--         and highest value (fairque/queue/shares.py's table; period in us, paused 0/1)
--   'list' cursor, count: a page of at most count tenants whose shares are not all
--         defaults
-- Returns, for 'get' and 'set', the tenant's row (shares_row in include/shares.lua); for
-- 'list', {next cursor, tenant, row, tenant, row...}.
--@include ready

local now = clock_now()

-- The reply, once the tick clock (moved by a tenant rejoining the ring) is saved.
local function done(reply)
  flush_writes()
  return reply
end

local op = ARGV[2]
if op == 'list' then return done(shares_page(false, shares_row)) end
local tenant = ARGV[3]
if tenant == nil or tenant == '' then return redis.error_reply('INVALID user_id is empty') end
if op == 'get' then return done(shares_row(tenant)) end
if op ~= 'set' then return redis.error_reply('INVALID op unknown operation ' .. tostring(op)) end

local current = shares_of(tenant) or DEFAULT_SHARES
local new, refused = read_change(current, SHARE_FIELDS)
if new == nil then return refused end
local stored, default = stored_form(new, SHARE_FIELDS, DEFAULT_SHARES)
if default then
  redis.call('HDEL', K.shares, tenant)
else
  redis.call('HSET', K.shares, tenant, stored)
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
forget_shares(tenant)
redis.call('ZREM', K.sleeping, tenant)
place(tenant, now)
wake_workers()
return done(shares_row(tenant))
