-- release: hand leased tasks back to the queue now (a worker shutting down), without
-- counting an attempt; each goes back to its place in line (its start_time is kept).
-- ARGV[6] = number of tasks, then per task: id, lease token.
-- Returns, per task, 1 if handed back or 0 if the caller no longer held its lease.
--@include ending

local n = tonumber(ARGV[FIRST_ARG])
local now = clock_now()
local released, unleased = {}, {}
for i = 1, n do
  local id, token = ARGV[FIRST_ARG + 2 * i - 1], ARGV[FIRST_ARG + 2 * i]
  local key = task_key(id)
  local f = redis.call('HMGET', key, 'state', 'lease_token', 'tenant', 'priority', 'start_time')
  if f[1] == 'started' and f[2] == token then
    unleased[#unleased + 1] = id
    redis.call('HSET', key, 'state', 'queued')
    queue_ready(id, f[3], tonumber(f[4]), tonumber(f[5]), true)
    count('released', f[3])
    released[i] = 1
  else
    released[i] = 0
  end
end
if #unleased > 0 then call_chunked('ZREM', K.leases, unleased) end
return flush(now, released)
