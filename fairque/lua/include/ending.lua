-- How an attempt ends: finished, failed (retried with backoff or final), canceled.
--@include ready

local LEASE_FIELDS = {'lease_deadline', 'lease_token', 'worker_id'}

-- Ends task `id` in a terminal state. Finished tasks are kept for finished_ttl, failed
-- and canceled ones for failed_ttl; a TTL of 0 removes the task at once.
local function end_task(id, tenant, state, now, reason)
  local ttl_seconds = SETTINGS.failed_ttl
  if state == 'finished' then ttl_seconds = SETTINGS.finished_ttl end
  local key = task_key(id)
  redis.call('HDEL', key, unpack(LEASE_FIELDS))
  if ttl_seconds <= 0 then
    redis.call('DEL', key, result_key(id))
  else
    redis.call('HSET', key, 'state', state, 'finished_at', int(now))
    if reason then redis.call('HSET', key, 'last_error', reason) end
    redis.call('EXPIRE', key, math.ceil(ttl_seconds))
    redis.call('ZADD', K['state:' .. state], now + ttl_seconds * MICROS, id)
  end
  local counts = {}
  count_by_tenant(counts, tenant)
  add_counters(state, counts)
end

-- A failed attempt: retry after base * 2^(attempts - 1) seconds (capped) while attempts
-- remain, else FAILED. Returns the new state.
local function retry_or_fail(id, now, reason, retry)
  local key = task_key(id)
  local f = redis.call('HMGET', key, 'tenant', 'attempts', 'max_retries', 'start_time')
  local tenant, attempts, max_retries = f[1], tonumber(f[2]) + 1, tonumber(f[3])
  redis.call('HSET', key, 'attempts', attempts, 'prev_start_time', f[4], 'last_error', reason)
  if retry and (max_retries < 0 or attempts <= max_retries) then
    local delay = SETTINGS.backoff_base * 2 ^ (attempts - 1)
    if delay > SETTINGS.backoff_max then delay = SETTINGS.backoff_max end
    local ready_at = now + math.floor(delay * MICROS)
    redis.call('HDEL', key, unpack(LEASE_FIELDS))
    redis.call('HSET', key, 'state', 'scheduled', 'execute_after', int(ready_at))
    redis.call('ZADD', K.scheduled, ready_at, id)
    local counts = {}
    count_by_tenant(counts, tenant)
    add_counters('retried', counts)
    return 'scheduled'
  end
  end_task(id, tenant, 'failed', now, reason)
  return 'failed'
end

-- True when `token` still holds the lease of task `id`.
local function holds_lease(id, token)
  local f = redis.call('HMGET', task_key(id), 'state', 'lease_token')
  return f[1] == 'started' and f[2] == token
end
