-- Shared by every script: argument conventions, key names, the server clock.
--
-- The loader prepends `local K = {...}` mapping each fixed key of the namespace to its
-- KEYS slot (see fairque/keys.py), so every script declares the keys it may touch.
-- Per-task and per-tenant keys share the same `fq:{ns}:` prefix, passed as ARGV[1],
-- so they hash to the namespace's cluster slot too.
local PREFIX = ARGV[1]
-- Queue settings, in ARGV[2..5] of every script; a script's own arguments start at ARGV[6].
local SETTINGS = {
  backoff_base = tonumber(ARGV[2]),
  backoff_max = tonumber(ARGV[3]),
  finished_ttl = tonumber(ARGV[4]),
  failed_ttl = tonumber(ARGV[5]),
}
local FIRST_ARG = 6
local CRITICAL = 6
local MICROS = 1000000

local function task_key(id) return PREFIX .. 'task:' .. id end
local function result_key(id) return PREFIX .. 'result:' .. id end
local function critical_key(tenant) return PREFIX .. 'queue:user:' .. tenant .. ':critical' end
local function normal_key(tenant, priority)
  return PREFIX .. 'queue:user:' .. tenant .. ':normal:' .. priority
end

-- Integers are kept as microseconds since the epoch (< 2^53, so exact in a Lua number);
-- Lua's own tostring would print them with 14 digits, so format them explicitly.
local function int(n) return string.format('%d', n) end

local function clock_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * MICROS + tonumber(t[2])
end

-- Ticks are strictly increasing per namespace and never behind the server clock: they
-- order tasks that become ready in the same microsecond (FIFO within a priority) and
-- serve as ring positions and lease tokens. Call save_ticks() before returning.
local last_tick = nil
local function next_tick(now)
  if last_tick == nil then last_tick = tonumber(redis.call('GET', K.clock) or '0') end
  if now > last_tick then last_tick = now else last_tick = last_tick + 1 end
  return last_tick
end
local function save_ticks()
  if last_tick ~= nil then redis.call('SET', K.clock, int(last_tick)) end
end

local function count_by_tenant(counts, tenant)
  counts[tenant] = (counts[tenant] or 0) + 1
end

-- Adds `counts` (tenant -> n) to the counter `name`, in total and per tenant.
local function add_counters(name, counts)
  local total = 0
  for tenant, n in pairs(counts) do
    redis.call('HINCRBY', K.stats, name .. ':' .. tenant, n)
    total = total + n
  end
  if total > 0 then redis.call('HINCRBY', K.stats, name, total) end
end
