-- Service figures for the fairness view: per minute of server time, how many tasks each
-- tenant started and how long they had waited from ready to start. A pop writes them
-- (one command per call, whatever the number of tenants); namespace/fairness reads
-- the busiest tenants of the last minutes without going over every tenant (fairness.lua).
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
  if not any_counted() then return end
  local only, n = only_counted()
  if only then -- one counter of one tenant (a one-task call): asking `counted` of each of
    -- the three cost a one-task push ~2.7k instructions
    for i = 1, #HISTORY_COUNTERS do
      if HISTORY_COUNTERS[i] == only then
        local all = figures_key(math.floor(now / (60 * MICROS)), 'all')
        if redis.call('HINCRBY', all, only, n) == n then redis.call('EXPIRE', all, FIGURES_TTL) end
        return
      end
    end
    return
  end
  local all = nil
  for i = 1, #HISTORY_COUNTERS do -- ipairs would cost a call per counter, as counted does
    local name = HISTORY_COUNTERS[i]
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

-- Writes this call's figures, then what writes.lua accumulated: what a call that counts
-- and appends needs at its end (storage/put, jobs/push); ending.lua's flush writes the
-- fair queue's first.
local function flush_counts(now, reply)
  flush_figures(now)
  flush_writes()
  return reply
end
