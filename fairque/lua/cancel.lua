-- cancel: a task that has not started (scheduled, deferred or queued) becomes CANCELED.
-- Its dependents can never run, so they are canceled too, with the reason recorded, and
-- the dependency sets are cleaned in both directions (seed 000, design section 7).
-- ARGV[6] = id. Returns the state the task was in; only the three above are canceled.
--@include ending

local now = clock_now()

-- Cancels one task if it has not started; returns its former state, and whether it was
-- canceled.
local function cancel_one(id, reason)
  local f = redis.call('HMGET', task_key(id), 'state', 'tenant', 'priority')
  local state, tenant = f[1], f[2]
  if state == 'queued' then
    unqueue(id, tenant, tonumber(f[3]))
  elseif state == 'scheduled' then
    redis.call('ZREM', K.scheduled, id)
  elseif state == 'deferred' then
    redis.call('SREM', K['state:deferred'], id)
  else
    return state, false
  end
  end_task(id, tenant, 'canceled', now, reason)
  for _, blocker in ipairs(redis.call('SMEMBERS', blocked_key(id))) do
    redis.call('SREM', waiting_key(blocker), id)
  end
  redis.call('DEL', blocked_key(id))
  return state, true
end

local id = ARGV[FIRST_ARG]
if redis.call('EXISTS', task_key(id)) == 0 then return redis.error_reply('NOT_FOUND ' .. id) end
local state, canceled = cancel_one(id, 'canceled')
if not canceled then return state end
local pending = {id}
while #pending > 0 do
  local current = table.remove(pending)
  for _, dependent in ipairs(redis.call('SMEMBERS', waiting_key(current))) do
    local _, also = cancel_one(dependent, 'dependency ' .. current .. ' was canceled')
    if also then pending[#pending + 1] = dependent end
  end
  redis.call('DEL', waiting_key(current))
end
return flush(now, state)
