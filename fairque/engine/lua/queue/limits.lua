-- queue/limits: read or change a task name's limits (include/shares.lua): a concurrency
-- limit, a rate limit and a paused flag, across all workers, on top of each tenant's
-- shares (a task starts only when both allow); and its tasks' defaults (timeout,
-- max_retries, priority, lease: include/push.lua, include/serving.lua). A change applies
-- at once.
-- KEYS: leases names:running sleeping wakeups:any shares names:defaults
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the operation: 'get', 'set' or 'list'
-- ARGV[3..] its arguments:
--   'get' name
--   'set' name, n, then n times: a field's name, its value ('' keeps it), its lowest
--         and highest value (NAME_SETTINGS of fairque/engine/fields.py; the weight
--         stays 1)
--   'list' cursor, count: a page of at most count names with limits
-- Returns, for 'get' and 'set', the name's row (limits_row below); for 'list', {next
-- cursor, name, row, name, row...}.
--@include ready

-- A name's settings: its limits, then its tasks' defaults.
local function settings_of(name)
  local s = {}
  for field, value in pairs(limits_of(name) or DEFAULT_LIMITS) do s[field] = value end
  for field, value in pairs(defaults_of(name) or TASK_DEFAULTS) do s[field] = value end
  return s
end

-- A name's settings and where it stands: NAME_SETTINGS in order (times in us, paused
-- 0/1), then its STARTED tasks (counted while it has limits), and when its rate window
-- opens (us, or -1).
local function limits_row(name)
  local s = settings_of(name)
  local row = {}
  for i, field in ipairs(NAME_SETTINGS.FIELDS) do row[i] = s[field] end
  row[#row + 1] = tonumber(redis.call('HGET', K['names:running'], name) or 0)
  row[#row + 1] = tonumber(redis.call('ZSCORE', K.sleeping, NAME_SLEEPER .. name)) or -1
  return row
end

local op = ARGV[2]
if op == 'list' then return shares_page(true, limits_row) end
local name = ARGV[3]
if name == nil or name == '' then return redis.error_reply('INVALID name is empty') end
if op == 'get' then return limits_row(name) end
if op ~= 'set' then return redis.error_reply('INVALID op unknown operation ' .. tostring(op)) end

local current = limits_of(name)
local new, refused = read_change(settings_of(name), NAME_SETTINGS.FIELDS)
if new == nil then return refused end
if new.weight ~= 1 then return redis.error_reply('INVALID weight a task name has none') end
local defaults, no_defaults = stored_form(new, TASK_FIELDS, TASK_DEFAULTS)
if no_defaults then
  redis.call('HDEL', K['names:defaults'], name)
else
  redis.call('HSET', K['names:defaults'], name, defaults)
end
local stored, default = stored_form(new, LIMIT_FIELDS, DEFAULT_LIMITS)
if default then
  redis.call('HDEL', K.shares, NAME_FIELD .. name)
  redis.call('HDEL', K['names:running'], name)
else
  if not current then
    -- Its tasks are counted from now on: those running now first, from the leases.
    local running = 0
    for _, id in ipairs(redis.call('ZRANGE', K.leases, 0, -1)) do
      if redis.call('HGET', task_key(id), 'name') == name then running = running + 1 end
    end
    if running > 0 then redis.call('HSET', K['names:running'], name, running) end
  end
  redis.call('HSET', K.shares, NAME_FIELD .. name, stored)
end
forget_limits(name)
redis.call('ZREM', K.sleeping, NAME_SLEEPER .. name)
name_servable(name) -- its workers look again; a pop puts it back to sleep if it must
wake_workers()
return limits_row(name)
