-- The fairness view (namespace/fairness, and stats' part of it): the busiest tenants of
-- the last minutes from figures.lua's records, each with its shares.
--@include figures
--@include shares

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
