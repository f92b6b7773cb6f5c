-- release: hand leased tasks back to the queue now (a worker shutting down), without
-- counting an attempt; each goes back to its place in line (its start_time is kept).
-- KEYS: leases stats clock strict:partitions constraints running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the number of tasks n
-- ARGV[3] MessagePack array of n rows (id, lease token) one after the other
-- Returns, per task, 1 if handed back or 0 if the caller no longer held its lease.
--@include ending

local rows = read_rows(ARGV[2], 2, ARGV[3])
if rows == nil then return redis.error_reply('INVALID tasks do not match their count') end
local now = clock_now()
local wanted = {'priority', 'start_time', 'name'}
local released = each_held_lease(rows, 2, wanted, function(row, f, kind, tenant)
  redis.call('HSET', task_key(row[1]), 'state', 'queued')
  queue_ready(row[1], kind, tenant, f[3] or '', tonumber(f[1]), tonumber(f[2]), true)
  count('released', tenant)
end)
return flush(now, released)
