-- Shared by every script: the namespace head, key names, the server clock.
--
-- The loader prepends `local K = {...}`, naming the keys the script declares in its
-- `-- KEYS:` line (see fairque/engine/scripts.py). Keys made from ids (tasks, tenants'
-- queues) share the namespace's `fq:{ns}:` prefix, passed as ARGV[1], so they hash to
-- its cluster slot too.
--
-- ARGV[1] of every script is the key prefix; a script's own arguments follow, from ARGV[2].
local PREFIX = ARGV[1]
local CRITICAL = 6
local MICROS = 1000000
-- Lua's unpack() is limited by the C stack (8000 slots): multi-member writes go in chunks.
local CHUNK = 1000

local function task_key(id) return PREFIX .. 'task:' .. id end
local function result_key(id) return PREFIX .. 'result:' .. id end
-- Seed 000: the tasks waiting for `id`, and the tasks `id` still waits for.
local function waiting_key(id) return PREFIX .. 'deps:waiting:' .. id end
local function blocked_key(id) return PREFIX .. 'deps:blocked:' .. id end
-- Lanes (design section 5): a fair task waits in the lane of its name, so that a worker
-- reaches only tasks it can run. A lane has its own ring, ready entries, wake-up token and
-- tenant queues; the lane of unnamed tasks, '', keeps the keys of data format 1. A name
-- may hold any character, so its length comes first: the key stays unambiguous. Each
-- lane's prefix is made once per namespace (NAMESPACE, fairque/engine/scripts.py), at
-- most 64 of them (then they are made again: a name may be 256 characters long, and
-- every library of the namespace's scripts that names lanes keeps its own).
local function lane_key(lane, suffix)
  if lane == '' then return PREFIX .. suffix end
  local prefix = NAMESPACE.lanes[lane]
  if prefix == nil then
    if NAMESPACE.lanes_kept >= 64 then NAMESPACE.lanes, NAMESPACE.lanes_kept = {}, 0 end
    prefix = PREFIX .. 'lane:' .. #lane .. ':' .. lane .. ':'
    NAMESPACE.lanes[lane], NAMESPACE.lanes_kept = prefix, NAMESPACE.lanes_kept + 1
  end
  return prefix .. suffix
end
-- The lanes where `tenant` has ready tasks.
local function lanes_of_key(tenant) return PREFIX .. 'lanes:of:' .. tenant end
local function critical_key(tenant, lane)
  return lane_key(lane, 'queue:user:' .. tenant .. ':critical')
end
-- A number joined to text is formatted first (~3k instructions): the levels' suffixes are
-- made once.
local NORMAL_LEVELS = {':normal:1', ':normal:2', ':normal:3', ':normal:4', ':normal:5'}
local function normal_key(tenant, priority, lane)
  return lane_key(lane, 'queue:user:' .. tenant .. (NORMAL_LEVELS[priority] or ':normal:' .. priority))
end

-- A page of a task list: the next cursor, then for each of `ids` that `keep` accepts
-- (each, without it) the id and the task's `fields` (nil where missing).
local function task_rows(next_cursor, ids, fields, keep)
  local reply = {next_cursor}
  for _, id in ipairs(ids) do
    local f = redis.call('HMGET', task_key(id), unpack(fields))
    if keep == nil or keep(f) then
      reply[#reply + 1] = id
      for i = 1, #fields do reply[#reply + 1] = f[i] end
    end
  end
  return reply
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

-- (Lua turns the two strings into numbers itself: two tonumber calls cost ~2k more.)
local function clock_now()
  local t = redis.call('TIME')
  return t[1] * MICROS + t[2]
end

-- Calls `command key a1 a2 ...` over `values` (from its `from`th, default the first),
-- CHUNK values at a time.
local function call_chunked(command, key, values, from)
  for first = from or 1, #values, CHUNK do
    redis.call(command, key, unpack(values, first, math.min(first + CHUNK - 1, #values)))
  end
end
