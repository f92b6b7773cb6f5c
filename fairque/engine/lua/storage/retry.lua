-- storage/retry: taken tasks go back to their queue, due at their next start time
-- (seed 004 RetryTask): attempts + 1, prev_start_time = the start time they were taken
-- at. Tasks that are not taken (not storage tasks, gone, or already back after their
-- visibility timeout: expired leases are reaped first) are left alone.
-- KEYS: leases stats clock state:finished state:failed state:canceled strict:partitions constraints settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the number of retries n
-- ARGV[3] MessagePack array of n rows (id, next start time (us)) one after the other
-- Returns how many tasks went back.
--@include expiry

local WIDTH = 2
local rows = read_rows(ARGV[2], WIDTH, ARGV[3])
if rows == nil then return redis.error_reply('INVALID retries do not match their count') end
for i, row in each_row(rows, WIDTH) do
  if type(row[1]) ~= 'string' or type(row[2]) ~= 'number' or row[2] < 0 then
    return redis.error_reply('INVALID retries row ' .. i)
  end
end
local now = clock_now()
reap_expired(now, setting('maintenance_batch'))
local unleased = {}
for _, row in each_row(rows, WIDTH) do
  local id, task = row[1], task_key(row[1])
  local f = redis.call('HMGET', task, 'queue', 'state', 'attempts', 'start_time', 'kind')
  if f[5] == 'storage' and f[2] == 'started' then
    unleased[#unleased + 1] = id
    redis.call('HSET', task, 'state', 'queued', 'attempts', (tonumber(f[3]) or 0) + 1,
      'prev_start_time', f[4], 'start_time', row[2])
    append('ZADD', storage_queue_key(f[1]), row[2], id)
    count('retried')
  end
end
if #unleased > 0 then call_chunked('ZREM', K.leases, unleased) end
return flush(now, #unleased)
