-- Service figures for the fairness view: per minute of server time, how many tasks each
-- tenant started and how long they had waited from ready to start. A pop writes them
-- (one command per call, whatever the number of tenants); namespace/fairness reads
-- the busiest tenants of the last minutes without going over every tenant.
--
-- Per minute m (us // 60e6), each key expiring FIGURES_TTL after its first write:
--   fairness:<m>:starts   zset    tenant -> starts (its busiest members are the top)
--   fairness:<m>:waits    hash    '<tenant>|<bucket>' -> starts whose wait fell in bucket
--   fairness:<m>:all      hash    'starts' -> all starts, '<bucket>' -> all waits in
--                                 bucket, 'pushed', 'finished', 'failed' -> those
--                                 counters' gains
--   fairness:<m>:pending  string  MessagePack records not yet added to the three above
-- A wait bucket b >= 1 holds waits below 1.5^b ms (from 1.5^(b-1) ms); bucket 0 holds
-- waits below 1 ms; the last one every longer wait.
--
-- A pop does not write its starts to the three: it APPENDs one record of them to
-- `pending`, and the call that brings `pending` to FOLD_BYTES, or that begins a later
-- minute's records, adds them to the three.
-- A pop wrote two or three commands per tenant served (~10k instructions each: small
-- hashes and zsets are listpacks, scanned and moved on every write); a record is one
-- command per call, and a fold writes once per tenant what many pops added. The readers
-- add what is still pending, so what they read is the same. A record is, per tenant
-- that started tasks: tenant, {bucket, starts, bucket, starts...}.
--@include ready
--@include writes

local FIGURES_TTL = 11 * 60
local WAIT_BUCKETS = 48
local LOG_BASE = math.log(1.5)
local FOLD_BYTES = 4096 -- bounds what a reader decodes: at most this per minute

local function wait_bucket(wait_us)
  local ms = wait_us / 1000
  if ms < 1 then return 0 end
  return math.min(WAIT_BUCKETS - 1, 1 + math.floor(math.log(ms) / LOG_BASE))
end

-- The keys of the minute last named are made from a prefix kept for the namespace
-- (NAMESPACE, fairque/engine/scripts.py): formatting the minute cost each key ~3k
-- instructions, and a pop names one or two.
local function figures_key(minute, part)
  if NAMESPACE.figures_minute ~= minute then
    NAMESPACE.figures_minute = minute
    NAMESPACE.figures_prefix = PREFIX .. 'fairness:' .. minute .. ':'
  end
  return NAMESPACE.figures_prefix .. part
end

-- Starts noted in this call, as the record flush_figures appends: tenant, {bucket, n,
-- bucket, n...}, tenant, ... in first-start order; and each tenant's bucket list. A call
-- fills few buckets per tenant, so a bucket is found by a scan of its list.
local start_record, start_buckets = nil, nil

local function note_start(tenant, wait_us)
  if start_record == nil then start_record, start_buckets = {}, {} end
  local buckets = start_buckets[tenant]
  if buckets == nil then
    buckets = {}
    start_buckets[tenant] = buckets
    start_record[#start_record + 1], start_record[#start_record + 2] = tenant, buckets
  end
  local b = wait_bucket(math.max(0, wait_us))
  for i = 1, #buckets, 2 do
    if buckets[i] == b then
      buckets[i + 1] = buckets[i + 1] + 1
      return
    end
  end
  buckets[#buckets + 1], buckets[#buckets + 2] = b, 1
end

-- The counters the throughput chart draws, per minute, so it has a history on opening.
local HISTORY_COUNTERS = {'pushed', 'finished', 'failed'}

-- The sums of minute `minute`'s pending records: overall {bucket -> starts}, all starts,
-- and unless `totals_only`, the tenants in first-start order and per tenant its
-- {bucket -> starts} and its starts.
local function pending_figures(minute, totals_only)
  local sums = {overall = {}, total = 0, tenants = {}, waits = {}, starts = {}}
  local packed = redis.call('GET', figures_key(minute, 'pending'))
  if not packed then return sums end
  local overall, total, tenants, waits, starts = sums.overall, 0, sums.tenants, sums.waits,
    sums.starts
  local offset, record = 0, nil
  while offset ~= -1 do
    offset, record = cmsgpack.unpack_one(packed, offset)
    for i = 1, #record, 2 do
      local tenant, flat = record[i], record[i + 1]
      local buckets = waits[tenant]
      if buckets == nil and not totals_only then
        buckets = {}
        waits[tenant], starts[tenant] = buckets, 0
        tenants[#tenants + 1] = tenant
      end
      for j = 1, #flat, 2 do
        local b, n = flat[j], flat[j + 1]
        overall[b] = (overall[b] or 0) + n
        total = total + n
        if buckets then
          buckets[b] = (buckets[b] or 0) + n
          starts[tenant] = starts[tenant] + n
        end
      end
    end
  end
  sums.total = total
  return sums
end

-- Adds minute `minute`'s pending records to its hashes and zset, and drops them. The
-- minute's first starts set the TTLs.
local function fold_figures(minute)
  local sums = pending_figures(minute)
  if sums.total == 0 then return end
  local starts, waits, all = figures_key(minute, 'starts'), figures_key(minute, 'waits'),
    figures_key(minute, 'all')
  for _, tenant in ipairs(sums.tenants) do
    for b, n in pairs(sums.waits[tenant]) do
      redis.call('HINCRBY', waits, tenant .. '|' .. b, n)
    end
    redis.call('ZINCRBY', starts, sums.starts[tenant], tenant)
  end
  for b, n in pairs(sums.overall) do redis.call('HINCRBY', all, b, n) end
  if redis.call('HINCRBY', all, 'starts', sums.total) == sums.total then
    for _, key in ipairs({starts, waits, all}) do redis.call('EXPIRE', key, FIGURES_TTL) end
  end
  redis.call('DEL', figures_key(minute, 'pending'))
end

-- Adds this call's gains of the HISTORY_COUNTERS (writes.lua's `count`) to the minute's
-- `all` hash; the first write of a field in a minute sets the TTL. They are written at
-- once: one command, as a record would be.
local function note_history(now)
  local all = nil
  for _, name in ipairs(HISTORY_COUNTERS) do
    local total = counted(name)
    if total then
      all = all or figures_key(math.floor(now / (60 * MICROS)), 'all')
      if redis.call('HINCRBY', all, name, total) == total then
        redis.call('EXPIRE', all, FIGURES_TTL)
      end
    end
  end
end

-- Appends this call's starts to the minute's pending records, and folds them when they
-- are due.
local function flush_figures(now)
  note_history(now)
  if start_record == nil then return end
  local record = start_record
  start_record, start_buckets = nil, nil
  local minute = math.floor(now / (60 * MICROS))
  local pending = figures_key(minute, 'pending')
  local packed = cmsgpack.pack(record)
  local size = redis.call('APPEND', pending, packed)
  if size == #packed then -- this minute's first record since its last fold
    redis.call('EXPIRE', pending, FIGURES_TTL)
    -- Earlier minutes are folded once a later one has records, so that a reader decodes
    -- one minute's records at most, whatever the window.
    local first, earlier = minute - FIGURES_TTL / 60, {}
    for m = first, minute - 1 do earlier[#earlier + 1] = figures_key(m, 'pending') end
    if redis.call('EXISTS', unpack(earlier)) > 0 then
      for m = first, minute - 1 do fold_figures(m) end
    end
  end
  if size >= FOLD_BYTES then fold_figures(minute) end
end

-- Tenants of `sums` (pending_figures) with the most starts, at most `top`.
local function busiest_pending(sums, top)
  local tenants = sums.tenants
  if #tenants > top then
    tenants = {unpack(tenants)}
    table.sort(tenants, function(a, b)
      return sums.starts[a] > sums.starts[b] or (sums.starts[a] == sums.starts[b] and a < b)
    end)
    for i = #tenants, top + 1, -1 do tenants[i] = nil end
  end
  return tenants
end

-- The last `window` minutes' figures: {all starts, overall wait buckets (48 counts),
-- per minute (oldest first) {minute, starts, pushed, finished, failed}, then per busiest
-- tenant (at most `top`, busiest first): tenant, starts, its buckets, its starts per
-- minute}. The busiest are chosen among each minute's own `top` busiest (folded, and
-- pending), so the cost is bounded by window * top and FOLD_BYTES, not by the number of
-- tenants.
local function read_figures(now, window, top)
  local last = math.floor(now / (60 * MICROS))
  local minutes, pending = {}, {}
  for m = last - window + 1, last do
    minutes[#minutes + 1] = m
    pending[#pending + 1] = pending_figures(m, top == 0)
  end
  local overall, total, history = {}, 0, {}
  for b = 0, WAIT_BUCKETS - 1 do overall[b + 1] = 0 end
  local seen, candidates = {}, {}
  local function consider(tenant)
    if not seen[tenant] then seen[tenant] = true; candidates[#candidates + 1] = tenant end
  end
  for i, m in ipairs(minutes) do
    local added = pending[i]
    local row = {m, added.total, 0, 0, 0}
    for b, n in pairs(added.overall) do overall[b + 1] = overall[b + 1] + n end
    local flat = redis.call('HGETALL', figures_key(m, 'all'))
    for j = 1, #flat, 2 do
      local field, value = flat[j], tonumber(flat[j + 1])
      if field == 'starts' then
        row[2] = row[2] + value
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
        consider(tenant)
      end
      for _, tenant in ipairs(busiest_pending(added, top)) do consider(tenant) end
    end
  end
  local sums, by_minute = {}, {}
  for _, tenant in ipairs(candidates) do sums[tenant], by_minute[tenant] = 0, {} end
  if #candidates > 0 then
    for i, m in ipairs(minutes) do
      local scores = redis.call('ZMSCORE', figures_key(m, 'starts'), unpack(candidates))
      for j, tenant in ipairs(candidates) do
        local n = (tonumber(scores[j]) or 0) + (pending[i].starts[tenant] or 0)
        sums[tenant] = sums[tenant] + n
        by_minute[tenant][#by_minute[tenant] + 1] = n
      end
    end
  end
  table.sort(candidates, function(a, b)
    return sums[a] > sums[b] or (sums[a] == sums[b] and a < b)
  end)
  local reply = {total, overall, history}
  for i = 1, math.min(top, #candidates) do
    local tenant = candidates[i]
    local fields = {}
    for b = 0, WAIT_BUCKETS - 1 do fields[b + 1] = tenant .. '|' .. b end
    local buckets = {}
    for b = 1, WAIT_BUCKETS do buckets[b] = 0 end
    for j, m in ipairs(minutes) do
      local counts_of = redis.call('HMGET', figures_key(m, 'waits'), unpack(fields))
      for b = 1, WAIT_BUCKETS do buckets[b] = buckets[b] + (tonumber(counts_of[b]) or 0) end
      for b, n in pairs(pending[j].waits[tenant] or {}) do buckets[b + 1] = buckets[b + 1] + n end
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
