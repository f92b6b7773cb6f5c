-- cancel: a task that has not started (scheduled, deferred or queued) becomes CANCELED.
-- ARGV[6] = id. Returns the state the task was in; only the three above are canceled.
--@include ending

local id = ARGV[FIRST_ARG]
local f = redis.call('HMGET', task_key(id), 'state', 'tenant', 'priority')
local state, tenant = f[1], f[2]
if not state then return redis.error_reply('NOT_FOUND ' .. id) end
if state == 'queued' then
  unqueue(id, tenant, tonumber(f[3]))
elseif state == 'scheduled' then
  redis.call('ZREM', K.scheduled, id)
elseif state == 'deferred' then
  redis.call('SREM', K['state:deferred'], id)
else
  return state
end
local now = clock_now()
end_task(id, tenant, 'canceled', now, 'canceled')
return flush(now, state)
