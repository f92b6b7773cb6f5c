-- reap: maintenance. Return expired leases, promote due scheduled tasks, and drop ids of
-- expired terminal tasks from the state registries. ARGV[6] = batch limit.
-- Returns {leases expired, tasks promoted, registry entries dropped}.
--@include maintenance

local limit = tonumber(ARGV[FIRST_ARG])
local now = clock_now()
local expired = reap_expired(now, limit)
local promoted = promote_due(now, limit)
local dropped = 0
for _, state in ipairs({'finished', 'failed', 'canceled'}) do
  dropped = dropped + redis.call('ZREMRANGEBYSCORE', K['state:' .. state], '-inf', now)
end
return flush(now, {expired, promoted, dropped})
