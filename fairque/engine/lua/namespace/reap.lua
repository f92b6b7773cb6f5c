-- reap: maintenance. Return expired leases, promote due scheduled tasks, drop ids of
-- expired terminal tasks from the state registries, and cancel deferred tasks whose
-- dependency no longer exists (it failed and its record expired, so they could never
-- run), looking at `limit` deferred tasks per call from where the last call stopped.
-- KEYS: ring ready scheduled leases stats clock state:deferred deps:cursor state:finished state:failed state:canceled strict:partitions constraints
-- ARGV[1..5] the namespace head (include/base.lua)
-- ARGV[6] the batch limit
-- Returns {leases expired, promoted, registry entries dropped, orphaned tasks canceled}.
--@include maintenance

local limit = tonumber(ARGV[6])
local now = clock_now()
local expired = reap_expired(now, limit)
local promoted = promote_due(now, limit)
local dropped = 0
for _, registry in pairs(ENDED) do
  dropped = dropped + redis.call('ZREMRANGEBYSCORE', registry, '-inf', now)
end
local orphaned = 0
local scan = redis.call('SSCAN', K['state:deferred'], redis.call('GET', K['deps:cursor']) or 0,
  'COUNT', limit)
redis.call('SET', K['deps:cursor'], scan[1])
for _, id in ipairs(scan[2]) do
  for _, blocker in ipairs(redis.call('SMEMBERS', blocked_key(id))) do
    if redis.call('EXISTS', task_key(blocker)) == 0 then
      cancel_with_dependents(id, 'dependency ' .. blocker .. ' no longer exists', now)
      orphaned = orphaned + 1
      break
    end
  end
end
return flush(now, {expired, promoted, dropped, orphaned})
