-- retry: run a FAILED task again now (say, after fixing what broke it). It keeps its
-- attempts and its dependents, which are released when it finishes.
-- ARGV[6] = id. Returns the state the task was in; only failed tasks are retried.
--@include ending

local id = ARGV[FIRST_ARG]
local key = task_key(id)
local f = redis.call('HMGET', key, 'state', 'tenant', 'priority')
if not f[1] then return redis.error_reply('NOT_FOUND ' .. id) end
if f[1] ~= 'failed' then return f[1] end
local now = clock_now()
redis.call('ZREM', K['state:failed'], id)
redis.call('PERSIST', key)
local start_time = next_tick(now)
redis.call('HSET', key, 'state', 'queued', 'start_time', start_time)
queue_ready(id, f[2], tonumber(f[3]), start_time)
count('requeued', f[2])
return flush(now, f[1])
