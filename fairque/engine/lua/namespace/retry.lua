-- retry: run a FAILED record again now (see requeue in include/ending.lua).
-- KEYS: stats clock state:failed strict:partitions constraints running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the id
-- Returns the state the record was in; only failed ones are retried.
--@include ending

local id = ARGV[2]
local f = redis.call('HMGET', task_key(id), 'state', 'tenant', 'priority', 'kind', 'name')
if not f[1] then return redis.error_reply('NOT_FOUND ' .. id) end
if f[1] ~= 'failed' then return f[1] end
local now = clock_now()
requeue(id, f[4], f[2], f[5] or '', f[3], now)
return flush(now, f[1])
