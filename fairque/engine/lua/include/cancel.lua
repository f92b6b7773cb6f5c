-- Canceling tasks, and the tasks that depend on them.
--@include ending

-- Cancels one task that has not ended; returns its former state, and whether it was
-- canceled. One that waits never starts; with `abort`, a task that runs loses its lease
-- at once (its tenant's slot is free again) and the caller publishes its id on the
-- `abort` channel, on which the worker holding it hears to stop the run. A strict job
-- that runs is never aborted: its constraints count it until its worker reports. It waits
-- for nothing any more: its links to its blockers go.
local function cancel_one(id, reason, now, abort)
  local f = redis.call('HMGET', task_key(id), 'state', 'tenant', 'priority', 'kind', 'name')
  local state, tenant, kind = f[1], f[2], f[4]
  if kind == 'storage' then return 'storage', false end -- seed 004's are done, never canceled
  if state == 'queued' then
    unqueue(id, kind, tenant, f[5] or '', tonumber(f[3]))
  elseif state == 'scheduled' then
    redis.call('ZREM', K.scheduled, id)
  elseif state == 'deferred' then
    redis.call('SREM', K['state:deferred'], id)
  elseif state == 'started' and abort and kind == 'task' then
    redis.call('ZREM', K.leases, id)
    lease_ended(kind, tenant, f[5])
  else
    return state, false
  end
  end_task(id, tenant, 'canceled', now, reason)
  local blockers = redis.call('SMEMBERS', blocked_key(id))
  for _, blocker in ipairs(blockers) do redis.call('SREM', waiting_key(blocker), id) end
  if #blockers > 0 then
    redis.call('DEL', blocked_key(id))
    redis.call('HINCRBY', K.stats, 'dependency_links', -#blockers)
  end
  return state, true
end

-- Cancels every task that depends on `id`, directly or not, since they can never run,
-- each with the reason recorded (design section 7): 'dependency <id> was <how>' for
-- those that wait for `id` itself.
local function cancel_dependents(id, how, now)
  local pending = {id}
  while #pending > 0 do
    local current = table.remove(pending)
    for _, dependent in ipairs(redis.call('SMEMBERS', waiting_key(current))) do
      local reason = 'dependency ' .. current .. ' was ' .. (current == id and how or 'canceled')
      local _, also = cancel_one(dependent, reason, now)
      if also then pending[#pending + 1] = dependent end
    end
    redis.call('DEL', waiting_key(current))
  end
end

-- Cancels `id` and the tasks that depend on it. Returns cancel_one's answer.
local function cancel_with_dependents(id, reason, now, abort)
  local state, canceled = cancel_one(id, reason, now, abort)
  if not canceled then return state, false end
  cancel_dependents(id, 'canceled', now)
  return state, true
end
