-- retry_failed: queue the FAILED tasks of one tenant again, a slice of the failed
-- registry at a time (the caller loops until the cursor is 0).
-- ARGV[6] = tenant, ARGV[7] = cursor (0 first), ARGV[8] = how many entries to look at.
-- Returns {next cursor (0: end), tasks queued again}.
--@include ending

local tenant = ARGV[FIRST_ARG]
local cursor, size = tonumber(ARGV[FIRST_ARG + 1]), tonumber(ARGV[FIRST_ARG + 2])
local ids = redis.call('ZRANGE', K['state:failed'], cursor, cursor + size - 1)
local now = clock_now()
local retried = 0
for _, id in ipairs(ids) do
  local f = redis.call('HMGET', task_key(id), 'state', 'tenant', 'priority')
  if f[1] == 'failed' and f[2] == tenant then
    requeue(id, f[2], f[3], now)
    retried = retried + 1
  end
end
-- Requeued entries left the registry: the next slice starts that much earlier.
local next_cursor = cursor + #ids - retried
if #ids < size then next_cursor = 0 end
return flush(now, {next_cursor, retried})
