-- Shared by every script: argument conventions, key names, the server clock, and the
-- per-call accumulators that turn per-task writes into one write per key.
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
-- Lua's unpack() is limited by the C stack (8000 slots): multi-member writes go in chunks.
local CHUNK = 1000

local function task_key(id) return PREFIX .. 'task:' .. id end
local function result_key(id) return PREFIX .. 'result:' .. id end
-- Seed 000: the tasks waiting for `id`, and the tasks `id` still waits for.
local function waiting_key(id) return PREFIX .. 'deps:waiting:' .. id end
local function blocked_key(id) return PREFIX .. 'deps:blocked:' .. id end
local function critical_key(tenant) return PREFIX .. 'queue:user:' .. tenant .. ':critical' end
local function normal_key(tenant, priority)
  return PREFIX .. 'queue:user:' .. tenant .. ':normal:' .. priority
end

-- Seed 004's numbered queue `n`: its task ids, score = start time (FIFO; a future score
-- is a delayed task).
local function storage_queue_key(n) return PREFIX .. 'storage:queue:' .. n end

-- A start argument: '' (nil, i.e. now), absolute microseconds, or '+' microseconds from
-- `now` (the server clock).
local function parse_start(start, now)
  if start == '' then return nil end
  if string.byte(start, 1) == 43 then return now + tonumber(string.sub(start, 2)) end -- '+'
  return tonumber(start)
end

-- Times are microseconds since the epoch (< 2^53, so exact in a Lua number). Numbers
-- passed to redis.call keep every digit; Lua's tostring does not, so string results
-- go through int().
local function int(n) return string.format('%d', n) end

local function clock_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * MICROS + tonumber(t[2])
end

-- Ticks are strictly increasing per namespace and never behind the server clock: they
-- order tasks that become ready in the same microsecond (FIFO within a priority), and
-- serve as ring positions and lease tokens.
local last_tick = nil
local function next_tick(now)
  if last_tick == nil then last_tick = tonumber(redis.call('GET', K.clock) or '0') end
  if now > last_tick then last_tick = now else last_tick = last_tick + 1 end
  return last_tick
end

-- Calls `command key a1 a2 ...` over `values`, CHUNK values at a time.
local function call_chunked(command, key, values)
  for first = 1, #values, CHUNK do
    redis.call(command, key, unpack(values, first, math.min(first + CHUNK - 1, #values)))
  end
end

-- Counters: counts[name][tenant] = n, written once per call by flush(); without a
-- tenant, only the total is counted.
local counts = {}
local function count(name, tenant)
  local by_tenant = counts[name]
  if by_tenant == nil then by_tenant = {}; counts[name] = by_tenant end
  tenant = tenant or ''
  by_tenant[tenant] = (by_tenant[tenant] or 0) + 1
end

-- Pending multi-member writes: appends[command][key] = {values...}, in call order.
-- `append` takes one value (RPUSH) or a score and a member (ZADD).
local appends, append_keys = {}, {}
local function append(command, key, value, member)
  local by_key = appends[command]
  if by_key == nil then by_key = {}; appends[command] = by_key end
  local values = by_key[key]
  if values == nil then
    values = {}
    by_key[key] = values
    append_keys[#append_keys + 1] = {command, key}
  end
  values[#values + 1] = value
  if member ~= nil then values[#values + 1] = member end
end

local function flush_appends()
  for _, entry in ipairs(append_keys) do
    call_chunked(entry[1], entry[2], appends[entry[1]][entry[2]])
  end
  appends, append_keys = {}, {}
end

local function flush_counters()
  for name, by_tenant in pairs(counts) do
    local total = 0
    for tenant, n in pairs(by_tenant) do
      if tenant ~= '' then redis.call('HINCRBY', K.stats, name .. ':' .. tenant, n) end
      total = total + n
    end
    redis.call('HINCRBY', K.stats, name, total)
  end
  counts = {}
end
