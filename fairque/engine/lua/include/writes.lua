-- The tick clock and the per-call accumulators that turn per-task writes into one write
-- per key. Every script that changes records includes this (after base).
--@include base

-- Ticks are strictly increasing per namespace and never behind the server clock: they
-- order tasks that become ready in the same microsecond (FIFO within a priority), and
-- serve as ring positions and lease tokens.
-- K.clock holds the last tick as an integer; a call that took ticks moves it by INCRBY
-- from the value it read (`read_tick`): a SET of the new value cost ~3k instructions more
-- (the string is made anew, where INCRBY changes the integer in place).
local last_tick, read_tick = nil, nil
local function next_tick(now)
  if last_tick == nil then
    read_tick = tonumber(redis.call('GET', K.clock) or '0')
    last_tick = read_tick
  end
  if now > last_tick then last_tick = now else last_tick = last_tick + 1 end
  return last_tick
end

-- The last tick handed out, without taking one.
local function latest_tick()
  return last_tick or tonumber(redis.call('GET', K.clock) or '0')
end

-- K['maintenance:quiet'] lives while nothing is due: no lease has run out, no scheduled
-- task is due, no rate window has opened. A pop that finds it skips the maintenance's
-- three checks (one EXISTS instead of a ZRANGE of each zset's head); one that does not
-- runs them and, if none finds anything due, sets it to expire by the earliest of those
-- heads, and QUIET_HORIZON from now at the latest (maintenance.lua). So an entry due later
-- than that needs no mark: a writer adding one due sooner (a short lease, a near retry, a
-- rate window about to open) deletes it, once per call.
local QUIET_HORIZON = MICROS
local quiet_broken = false
local function note_due(when, now)
  if not quiet_broken and when < now + QUIET_HORIZON then
    redis.call('DEL', K['maintenance:quiet'])
    quiet_broken = true
  end
end

-- Sets the mark to expire at `expires` (ms): a later note_due in this call deletes it again.
local function mark_quiet(expires)
  redis.call('SET', K['maintenance:quiet'], 1, 'PXAT', expires)
  quiet_broken = false
end

-- Counters: counts[name][tenant] = n, written once per call by flush(); without a
-- tenant, only the total is counted. This and the other per-call accumulators are made
-- by their first use: a table costs a call ~1k instructions, and most calls use few.
-- Most calls count one name for one tenant (a push or a finish of one task): that one is
-- kept in count_name, count_tenant and count_n, and the tables are made only when a
-- second name or tenant comes (the two tables cost a one-task push ~4k).
local counts = nil
local count_name, count_tenant, count_n = nil, nil, 0
local function count(name, tenant)
  tenant = tenant or ''
  if counts == nil then
    if count_name == nil then
      count_name, count_tenant, count_n = name, tenant, 1
      return
    end
    if name == count_name and tenant == count_tenant then
      count_n = count_n + 1
      return
    end
    counts = {[count_name] = {[count_tenant] = count_n}}
  end
  local by_tenant = counts[name]
  if by_tenant == nil then by_tenant = {}; counts[name] = by_tenant end
  by_tenant[tenant] = (by_tenant[tenant] or 0) + 1
end

-- Whether this call counted anything: most empty calls count nothing, and asking each
-- counter (counted) cost an empty pop ~2.5k instructions.
local function any_counted() return count_name ~= nil end

-- The name and count of the one thing this call counted, if it counted one name for
-- one tenant (else nil).
local function only_counted()
  if counts == nil then return count_name, count_n end
  return nil
end

-- How many `name` counted in this call, over all tenants; nil if none.
local function counted(name)
  if counts == nil then
    if name == count_name then return count_n end
    return nil
  end
  local by_tenant = counts[name]
  if by_tenant == nil then return nil end
  local total = 0
  for _, n in pairs(by_tenant) do total = total + n end
  return total
end

-- Pending multi-member writes: appends[key] = {values...} for `command` of that key,
-- and append_order = command, key, command, key... in call order. A key takes one command
-- (its type's: ZADD a zset, SADD a set). `append` takes one value (SADD) or a score and
-- a member (ZADD). A call's first append is kept in the four append_* below, and the
-- tables are made by a second (a one-task push appends once: its tables cost it ~5k).
local appends, append_order = nil, nil
local append_command, append_key, append_value, append_member = nil, nil, nil, nil
local function append(command, key, value, member)
  if appends == nil then
    if append_key == nil then
      append_command, append_key, append_value, append_member = command, key, value, member
      return
    end
    appends = {[append_key] = {append_value, append_member}}
    append_order = {append_command, append_key}
  end
  local values = appends[key]
  if values == nil then
    values = {}
    appends[key] = values
    append_order[#append_order + 1], append_order[#append_order + 2] = command, key
  end
  values[#values + 1] = value
  if member ~= nil then values[#values + 1] = member end
end

-- Small zsets and hashes are listpacks, where a write scans and moves the whole list
-- (a ZADD scans it twice: to find the member, then to place it). Makes `key` (a 'zset'
-- or a 'hash') a skiplist or a hash table if it is still a listpack: a member or field
-- longer than the server's *-max-listpack-value turns it, and it does not turn back
-- until it is deleted (emptied); this one is removed at once.
local TURNING = '--------------------------------------------------------------------' ..
  '------------------------------------------------------------' -- 128 bytes
local function leave_listpack(key, kind)
  if redis.call('OBJECT', 'ENCODING', key) ~= 'listpack' then return end
  if kind == 'zset' then
    redis.call('ZADD', key, 0, TURNING)
    redis.call('ZREM', key, TURNING)
  else
    redis.call('HSET', key, TURNING, 0)
    redis.call('HDEL', key, TURNING)
  end
end

-- ZADDs `values` (score, member, score, member...) to `key` as a skiplist, for a zset
-- that gets many members at once and loses them one by one (a pop's leases): in a
-- listpack each of those writes would scan the whole list. A ZADD whose first member is
-- longer than the server's zset-max-listpack-value creates the key as a skiplist, or
-- turns a listpack, before the other members go in; that member leaves in the next
-- command.
local function zadd_into_skiplist(key, values)
  local rest = 1
  if redis.call('OBJECT', 'ENCODING', key) ~= 'skiplist' then
    redis.call('ZADD', key, 0, TURNING, unpack(values, 1, math.min(#values, CHUNK)))
    redis.call('ZREM', key, TURNING)
    rest = CHUNK + 1
  end
  call_chunked('ZADD', key, values, rest)
end

local function flush_appends()
  if append_key == nil then return end
  if appends == nil then
    if append_member == nil then
      redis.call(append_command, append_key, append_value)
    else
      redis.call(append_command, append_key, append_value, append_member)
    end
  else
    for i = 1, #append_order, 2 do
      local key = append_order[i + 1]
      call_chunked(append_order[i], key, appends[key])
    end
  end
  appends, append_order, append_key = nil, nil, nil
end

-- K.stats holds each counter over every kind of task; K['stats:tenants'] holds each
-- tenant's ('<name>:<tenant>') and their sum over tenants ('<name>'), so reading the
-- totals never goes over the tenants.
local function flush_counters()
  if count_name == nil then return end
  if counts == nil then
    if count_tenant ~= '' then
      redis.call('HINCRBY', K['stats:tenants'], count_name .. ':' .. count_tenant, count_n)
      redis.call('HINCRBY', K['stats:tenants'], count_name, count_n)
    end
    redis.call('HINCRBY', K.stats, count_name, count_n)
  else
    for name, by_tenant in pairs(counts) do
      local total, of_tenants = 0, 0
      for tenant, n in pairs(by_tenant) do
        if tenant ~= '' then
          redis.call('HINCRBY', K['stats:tenants'], name .. ':' .. tenant, n)
          of_tenants = of_tenants + n
        end
        total = total + n
      end
      if of_tenants ~= 0 then redis.call('HINCRBY', K['stats:tenants'], name, of_tenants) end
      redis.call('HINCRBY', K.stats, name, total)
    end
  end
  counts, count_name = nil, nil
end

-- Writes what this call accumulated here, and the tick clock if it moved: what a call
-- flushes last (figures.lua's flush_counts reads the counters first).
local function flush_writes()
  flush_appends()
  flush_counters()
  if last_tick ~= nil then redis.call('INCRBY', K.clock, last_tick - read_tick) end
end
