-- storage/get: take up to `count` due tasks of one numbered queue, oldest start time
-- first (seed 004 GetTask). Each is leased for the visibility timeout: no other caller
-- gets it until then, and if it is neither done nor retried by then it comes back
-- (attempts + 1). Expired leases are reaped first, so no separate reaper is needed.
-- KEYS: leases stats clock state:finished state:failed state:canceled strict:partitions constraints settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet storage:queue:<n>...
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the queue number (its key is the one variadic key)
-- ARGV[3] count
-- ARGV[4] the visibility timeout (s)
-- Returns, per task: id, payload, attempts, created_at, start_time, prev_start_time ('').
--@include storage
--@include expiry

local key = declared_queue_key(1, tonumber(ARGV[2]))
if key == nil then return redis.error_reply('INVALID queue_num does not match its key') end
local wanted = tonumber(ARGV[3])
local visibility = tonumber(ARGV[4])
local now = clock_now()
reap_expired(now, setting('maintenance_batch'))
flush_ready(now) -- reaped tasks are written back before the queue is read

local ids = redis.call('ZRANGEBYSCORE', key, '-inf', due_horizon(now), 'LIMIT', 0, wanted)
if #ids == 0 then return flush(now, {}) end
call_chunked('ZREM', key, ids)
local deadline = now + math.floor(visibility * MICROS)
local taken = {}
for _, id in ipairs(ids) do
  local task = task_key(id)
  local f = redis.call('HMGET', task, 'payload', 'attempts', 'created_at', 'start_time',
    'prev_start_time')
  redis.call('HSET', task, 'state', 'started', 'leased_at', now, 'lease_deadline', deadline)
  append('ZADD', K.leases, deadline, id)
  note_due(deadline, now)
  local row = #taken
  taken[row + 1], taken[row + 2], taken[row + 3] = id, f[1], f[2] or 0
  taken[row + 4], taken[row + 5], taken[row + 6] = f[3], f[4], f[5] or ''
  count('started')
end
return flush(now, taken)
