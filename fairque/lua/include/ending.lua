-- How an attempt ends: finished, failed (retried with backoff or final), canceled.
--@include ready

-- Ends task `id` in a terminal state. Finished tasks are kept for finished_ttl, failed
-- and canceled ones for failed_ttl, and listed in state:<state> until then; a TTL of 0
-- removes the task at once (seed 001: discard). Registry writes wait for flush().
local function end_task(id, tenant, state, now, reason)
  local ttl_seconds = SETTINGS.failed_ttl
  if state == 'finished' then ttl_seconds = SETTINGS.finished_ttl end
  local key = task_key(id)
  if ttl_seconds <= 0 then
    redis.call('DEL', key, result_key(id))
  else
    if reason then
      redis.call('HSET', key, 'state', state, 'finished_at', now, 'last_error', reason)
    else
      redis.call('HSET', key, 'state', state, 'finished_at', now)
    end
    redis.call('EXPIRE', key, math.ceil(ttl_seconds))
    append('ZADD', K['state:' .. state], now + ttl_seconds * MICROS, id)
  end
  count(state, tenant)
end

-- A failed attempt: retry after base * 2^(attempts - 1) seconds (capped) while attempts
-- remain, else FAILED. Returns the new state.
local function retry_or_fail(id, now, reason, retry)
  local key = task_key(id)
  local f = redis.call('HMGET', key, 'tenant', 'attempts', 'max_retries', 'start_time')
  local tenant, attempts, max_retries = f[1], (tonumber(f[2]) or 0) + 1, tonumber(f[3])
  if retry and (max_retries < 0 or attempts <= max_retries) then
    local delay = SETTINGS.backoff_base * 2 ^ (attempts - 1)
    if delay > SETTINGS.backoff_max then delay = SETTINGS.backoff_max end
    local ready_at = now + math.floor(delay * MICROS)
    redis.call('HSET', key, 'state', 'scheduled', 'attempts', attempts,
      'prev_start_time', f[4], 'last_error', reason, 'execute_after', ready_at)
    redis.call('ZADD', K.scheduled, ready_at, id)
    count('retried', tenant)
    return 'scheduled'
  end
  redis.call('HSET', key, 'attempts', attempts, 'prev_start_time', f[4])
  end_task(id, tenant, 'failed', now, reason)
  return 'failed'
end

-- The MessagePack rows in ARGV[FIRST_ARG + 1], which ARGV[FIRST_ARG] says number `n`;
-- nil if they do not match.
local function read_rows()
  local rows = cmsgpack.unpack(ARGV[FIRST_ARG + 1])
  if type(rows) ~= 'table' or #rows ~= tonumber(ARGV[FIRST_ARG]) then return nil end
  return rows
end

-- For each row {id, lease token, ...} whose token still holds the task's lease: calls
-- handle(row, fields), fields being the task's `wanted` hash fields, and drops the lease.
-- Returns 1 (held) or 0 (lost) per row.
local function each_held_lease(rows, wanted, handle)
  local held, unleased = {}, {}
  for i, row in ipairs(rows) do
    local f = redis.call('HMGET', task_key(row[1]), 'state', 'lease_token', unpack(wanted))
    if f[1] == 'started' and f[2] == row[2] then
      unleased[#unleased + 1] = row[1]
      handle(row, {unpack(f, 3)})
      held[i] = 1
    else
      held[i] = 0
    end
  end
  if #unleased > 0 then call_chunked('ZREM', K.leases, unleased) end
  return held
end

-- True when `token` still holds the lease of task `id`.
local function holds_lease(id, token)
  local f = redis.call('HMGET', task_key(id), 'state', 'lease_token')
  return f[1] == 'started' and f[2] == token
end

-- Writes everything this call accumulated; every script returns through here.
local function flush(now, reply)
  flush_ready(now)
  flush_appends()
  flush_counters()
  if last_tick ~= nil then redis.call('SET', K.clock, last_tick) end
  return reply
end
