-- tenant_stats: per-tenant stats rows, either a page of the tenants with ready tasks,
-- the busiest first, or the named tenants (with or without ready tasks).
-- KEYS: stats:tenants ready:tenants
-- FLAGS: no-writes
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the rank of the first row (0-based)
-- ARGV[3] how many rows
-- ARGV[4..] tenants to read instead of a page (none: the page)
-- Returns the rows (include/tenant_stats.lua tenant_stat_row).
--@include tenant_stats

local rows
if #ARGV > 3 then
  rows = {}
  for i = 4, #ARGV do
    rows[#rows + 1] = tenant_stat_row(ARGV[i], redis.call('ZSCORE', K['ready:tenants'], ARGV[i]))
  end
else
  local first = tonumber(ARGV[2])
  rows = tenant_stat_rows(first, first + tonumber(ARGV[3]) - 1)
end
return rows
