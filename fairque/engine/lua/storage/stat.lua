-- storage/stat: per numbered queue, tasks held, ready, taken and delayed (seed 004
-- GetStat). Expired leases are reaped first, so a task past its visibility timeout
-- counts as ready, not taken.
-- KEYS: leases stats clock state:finished state:failed state:canceled strict:partitions constraints storage:queues settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- Returns a flat list: queue number, total, ready, taken, delayed, for each queue.
--@include storage
--@include expiry

local now = clock_now()
reap_expired(now, setting('maintenance_batch'))
flush_ready(now)
local horizon = due_horizon(now)
local held = redis.call('HGETALL', K['storage:queues'])
local reply = {}
for i = 1, #held, 2 do
  local key, total = storage_queue_key(held[i]), tonumber(held[i + 1])
  local queued = redis.call('ZCARD', key)
  local ready = redis.call('ZCOUNT', key, '-inf', horizon)
  local row = #reply
  reply[row + 1], reply[row + 2], reply[row + 3] = tonumber(held[i]), total, ready
  reply[row + 4], reply[row + 5] = total - queued, queued - ready
end
return flush(now, reply)
