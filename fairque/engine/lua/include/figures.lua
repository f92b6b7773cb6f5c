-- Service figures for the fairness view: per minute of server time, how many tasks each
-- tenant started and how long they had waited from ready to start. A pop writes them
-- (a few commands per call, whatever the number of tenants); namespace/fairness reads
-- the busiest tenants of the last minutes without going over every tenant.
--
-- Per minute m (us // 60e6), each key expiring FIGURES_TTL after the minute began:
--   fairness:<m>:starts  zset  tenant -> starts (its busiest members are the top)
--   fairness:<m>:waits   hash  '<tenant>|<bucket>' -> starts whose wait fell in bucket
--   fairness:<m>:all     hash  'starts' -> all starts, '<bucket>' -> all waits in bucket,
--                              'pushed', 'finished', 'failed' -> those counters' gains
-- A wait bucket b >= 1 holds waits below 1.5^b ms (from 1.5^(b-1) ms); bucket 0 holds
-- waits below 1 ms; the last one every longer wait.
--@include ready
--@include writes

local FIGURES_TTL = 11 * 60
local WAIT_BUCKETS = 48
local LOG_BASE = math.log(1.5)

local function wait_bucket(wait_us)
  local ms = wait_us / 1000
  if ms < 1 then return 0 end
  return math.min(WAIT_BUCKETS - 1, 1 + math.floor(math.log(ms) / LOG_BASE))
end

local function figures_key(minute, part)
  return PREFIX .. 'fairness:' .. minute .. ':' .. part
end

-- Starts noted in this call: waits[tenant][bucket] = n, tenants in first-start order.
local start_waits, start_tenants = {}, {}

local function note_start(tenant, wait_us)
  local buckets = start_waits[tenant]
  if buckets == nil then
    buckets = {}
    start_waits[tenant] = buckets
    start_tenants[#start_tenants + 1] = tenant
  end
  local b = wait_bucket(math.max(0, wait_us))
  buckets[b] = (buckets[b] or 0) + 1
end

-- The counters the throughput chart draws, per minute, so it has a history on opening.
local HISTORY_COUNTERS = {'pushed', 'finished', 'failed'}

-- Adds this call's gains of the HISTORY_COUNTERS (see writes.lua's `counts`) to the
-- minute's `all` hash; the first write of a field in a minute sets the TTL.
local function note_history(now)
  local all = nil
  for _, name in ipairs(HISTORY_COUNTERS) do
    local by_tenant = counts[name]
    if by_tenant then
      local total = 0
      for _, n in pairs(by_tenant) do total = total + n end
      all = all or figures_key(math.floor(now / (60 * MICROS)), 'all')
      if redis.call('HINCRBY', all, name, total) == total then
        redis.call('EXPIRE', all, FIGURES_TTL)
      end
    end
  end
end

local function flush_figures(now)
  note_history(now)
  if #start_tenants == 0 then return end
  local minute = math.floor(now / (60 * MICROS))
  local starts, waits, all = figures_key(minute, 'starts'), figures_key(minute, 'waits'),
    figures_key(minute, 'all')
  local total, overall = 0, {}
  for _, tenant in ipairs(start_tenants) do
    local n = 0
    for b, count in pairs(start_waits[tenant]) do
      redis.call('HINCRBY', waits, tenant .. '|' .. b, count)
      overall[b] = (overall[b] or 0) + count
      n = n + count
    end
    redis.call('ZINCRBY', starts, n, tenant)
    total = total + n
  end
  for b, count in pairs(overall) do redis.call('HINCRBY', all, b, count) end
  if redis.call('HINCRBY', all, 'starts', total) == total then -- the minute's first starts
    for _, key in ipairs({starts, waits, all}) do redis.call('EXPIRE', key, FIGURES_TTL) end
  end
  start_waits, start_tenants = {}, {}
end

-- The last `window` minutes' figures: {all starts, overall wait buckets (48 counts),
-- per minute (oldest first) {minute, starts, pushed, finished, failed}, then per busiest
-- tenant (at most `top`, busiest first): tenant, starts, its buckets, its starts per
-- minute}. The busiest are chosen among each minute's own `top` busiest, so the cost is
-- bounded by window * top, not by the number of tenants.
local function read_figures(now, window, top)
  local last = math.floor(now / (60 * MICROS))
  local minutes = {}
  for m = last - window + 1, last do minutes[#minutes + 1] = m end
  local overall, total, history = {}, 0, {}
  for b = 0, WAIT_BUCKETS - 1 do overall[b + 1] = 0 end
  local seen, candidates = {}, {}
  for _, m in ipairs(minutes) do
    local row = {m, 0, 0, 0, 0}
    local flat = redis.call('HGETALL', figures_key(m, 'all'))
    for i = 1, #flat, 2 do
      local field, value = flat[i], tonumber(flat[i + 1])
      if field == 'starts' then
        row[2] = value
      elseif field == 'pushed' then
        row[3] = value
      elseif field == 'finished' then
        row[4] = value
      elseif field == 'failed' then
        row[5] = value
      else
        local b = tonumber(field) + 1
        overall[b] = overall[b] + value
      end
    end
    total = total + row[2]
    history[#history + 1] = row
    if top > 0 then -- ZRANGE 0 -1 would read every tenant
      for _, tenant in ipairs(redis.call('ZRANGE', figures_key(m, 'starts'), 0, top - 1, 'REV')) do
        if not seen[tenant] then seen[tenant] = true; candidates[#candidates + 1] = tenant end
      end
    end
  end
  local sums, by_minute = {}, {}
  for _, tenant in ipairs(candidates) do sums[tenant], by_minute[tenant] = 0, {} end
  if #candidates > 0 then
    for _, m in ipairs(minutes) do
      local scores = redis.call('ZMSCORE', figures_key(m, 'starts'), unpack(candidates))
      for i, tenant in ipairs(candidates) do
        local n = tonumber(scores[i]) or 0
        sums[tenant] = sums[tenant] + n
        by_minute[tenant][#by_minute[tenant] + 1] = n
      end
    end
  end
  table.sort(candidates, function(a, b) return sums[a] > sums[b] or (sums[a] == sums[b] and a < b) end)
  local reply = {total, overall, history}
  for i = 1, math.min(top, #candidates) do
    local tenant = candidates[i]
    local fields = {}
    for b = 0, WAIT_BUCKETS - 1 do fields[b + 1] = tenant .. '|' .. b end
    local buckets = {}
    for b = 1, WAIT_BUCKETS do buckets[b] = 0 end
    for _, m in ipairs(minutes) do
      local counts_of = redis.call('HMGET', figures_key(m, 'waits'), unpack(fields))
      for b = 1, WAIT_BUCKETS do buckets[b] = buckets[b] + (tonumber(counts_of[b]) or 0) end
    end
    reply[#reply + 1] = tenant
    reply[#reply + 1] = sums[tenant]
    reply[#reply + 1] = buckets
    reply[#reply + 1] = by_minute[tenant]
  end
  return reply
end

-- The reply of namespace/fairness: {server time (us), all starts, overall wait buckets,
-- minutes, then per tenant, busiest first: tenant, starts, wait buckets, starts per
-- minute, shares row}.
local function fairness_reply(now, window, top)
  local figures = read_figures(now, window, top)
  local reply = {now, figures[1], figures[2], figures[3]}
  for i = 4, #figures, 4 do
    local tenant = figures[i]
    for j = 0, 3 do reply[#reply + 1] = figures[i + j] end
    reply[#reply + 1] = shares_row(tenant)
  end
  return reply
end
