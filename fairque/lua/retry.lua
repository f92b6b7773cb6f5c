-- retry: run a FAILED task again now (see requeue in include/ending.lua).
-- ARGV[6] = id. Returns the state the task was in; only failed tasks are retried.
--@include ending

local id = ARGV[FIRST_ARG]
local f = redis.call('HMGET', task_key(id), 'state', 'tenant', 'priority')
if not f[1] then return redis.error_reply('NOT_FOUND ' .. id) end
if f[1] ~= 'failed' then return f[1] end
local now = clock_now()
requeue(id, f[2], f[3], now)
return flush(now, f[1])
