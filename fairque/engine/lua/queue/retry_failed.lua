-- retry_failed: queue the FAILED tasks of one tenant again, a slice of the failed
-- registry at a time (the caller loops until the cursor is 0).
-- KEYS: stats clock state:failed strict:partitions constraints settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the tenant
-- ARGV[3] the cursor (0 first)
-- Returns {next cursor (0: end), tasks queued again}.
--@include ending

local tenant = ARGV[2]
local cursor, size = tonumber(ARGV[3]), setting('maintenance_batch')
local ids = redis.call('ZRANGE', K['state:failed'], cursor, cursor + size - 1)
local now = clock_now()
local retried = 0
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', task_key(id), 'state', 'tenant', 'priority', 'kind', 'name')
  if f[1] == 'failed' and f[2] == tenant then
    requeue(id, f[4], f[2], f[5] or '', f[3], now)
    retried = retried + 1
  end
end
-- Requeued entries left the registry: the next slice starts that much earlier.
local next_cursor = cursor + #ids - retried
if #ids < size then next_cursor = 0 end
return flush(now, {next_cursor, retried})
