-- Tenants' stats rows: the ready backlog (K['ready:tenants'], ready.lua) and the
-- counters writes.lua keeps per tenant (K['stats:tenants']).

-- The per-tenant counters that stats rows show (TenantStats), in reply order.
local TENANT_COUNTERS = {'pushed', 'finished', 'failed', 'retried', 'requeued', 'canceled',
  'expired'}

-- A tenant's stats row: {tenant, ready, counters in TENANT_COUNTERS order}; `ready` is
-- its score in K['ready:tenants'].
local function tenant_stat_row(tenant, ready)
  local fields = {}
  for i, name in ipairs(TENANT_COUNTERS) do fields[i] = name .. ':' .. tenant end
  local row = {tenant, tonumber(ready) or 0}
  for _, value in ipairs(redis.call('HMGET', K['stats:tenants'], unpack(fields))) do
    row[#row + 1] = tonumber(value) or 0
  end
  return row
end

-- Stats rows of the tenants ranked `first` to `last` (0-based) by ready backlog, the
-- busiest first. Costs O(log tenants + rows): nothing here goes over every tenant.
local function tenant_stat_rows(first, last)
  local ranked = redis.call('ZREVRANGE', K['ready:tenants'], first, last, 'WITHSCORES')
  local rows = {}
  for i = 1, #ranked, 2 do rows[#rows + 1] = tenant_stat_row(ranked[i], ranked[i + 1]) end
  return rows
end
