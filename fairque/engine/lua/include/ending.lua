-- How an attempt ends: finished, failed (retried with backoff or final), its lease
-- dropped; ended tasks' dependents, a failed task queued again. Canceling is cancel.lua's.
--@include ready
--@include settings
--@include figures
--@include rows

-- The registry of tasks ended in `state`: ids by the time their record expires (us).
local function ended_registry(state)
  if state == 'finished' then return K['state:finished'] end
  if state == 'failed' then return K['state:failed'] end
  return K['state:canceled']
end

-- Ids that reached a terminal state in this call. flush() publishes them once on the
-- namespace's `ended` channel (sharded pub/sub, like `wake`), so a producer waiting for
-- a task's outcome (queue.result) learns of it without polling.
local ended_ids = nil

-- Ends task `id` in a terminal state. Finished tasks are kept for finished_ttl, failed
-- and canceled ones for failed_ttl, and listed in state:<state> until then; a TTL of 0
-- removes the task at once (seed 001: discard). Registry writes wait for flush(). An
-- `unawaited` end is not published: no one can wait for it (see finish_held).
local function end_task(id, tenant, state, now, reason, unawaited)
  local ttl_seconds = setting(state == 'finished' and 'finished_ttl' or 'failed_ttl')
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
    append('ZADD', ended_registry(state), now + ttl_seconds * MICROS, id)
  end
  count(state, tenant)
  if unawaited then return end
  if ended_ids == nil then ended_ids = {} end
  ended_ids[#ended_ids + 1] = id
end

-- A deferred task whose last dependency finished: queued, or scheduled if its
-- execute_after is still ahead.
local function undefer(id, now)
  local key = task_key(id)
  local f = redis.call('HMGET', key, 'state', 'tenant', 'priority', 'execute_after', 'kind',
    'name')
  if f[1] ~= 'deferred' then return end
  redis.call('SREM', K['state:deferred'], id)
  local execute_after = tonumber(f[4])
  if execute_after ~= nil and execute_after > now then
    redis.call('HSET', key, 'state', 'scheduled')
    redis.call('ZADD', K.scheduled, execute_after, id)
    note_due(execute_after, now)
    due_in_lane(f[6] or '', execute_after)
  else
    local start_time = next_tick(now)
    redis.call('HSET', key, 'state', 'queued', 'start_time', start_time)
    queue_ready(id, f[5], f[2], f[6] or '', tonumber(f[3]), start_time)
  end
end

-- Task `id` finished: it blocks its dependents no more; those with no blocker left run,
-- in this same call, so each is released exactly once (seed 000).
local function release_dependents(id, now)
  local links = 0
  for _, dependent in ipairs(redis.call('SMEMBERS', waiting_key(id))) do
    local blockers = blocked_key(dependent)
    links = links + redis.call('SREM', blockers, id)
    if redis.call('SCARD', blockers) == 0 then
      redis.call('DEL', blockers)
      undefer(dependent, now)
      count('undeferred')
    end
  end
  redis.call('DEL', waiting_key(id))
  if links > 0 then redis.call('HINCRBY', K.stats, 'dependency_links', -links) end
end

-- The failed attempts' errors a task keeps, the newest last: ERRORS_KEPT ATTEMPT_ERROR
-- rows in its `errors` field (fairque.engine.records keeps the same count).
local ERRORS_KEPT = 5

-- The `errors` field of a task whose field was `stored` (false: none yet), with attempt
-- `attempt` failed at `now` on `worker` (false: unknown) added and the oldest dropped past
-- ERRORS_KEPT. The caller writes it with the writes it makes anyway, so a failure costs
-- no command more; the text comes bounded by the clients (ErrorReport.bounded).
local function with_error(stored, now, attempt, worker, kind, message, traceback)
  local errors = stored and cmsgpack.unpack(stored) or {}
  local row = {}
  row[ATTEMPT_ERROR.at + 1], row[ATTEMPT_ERROR.attempt + 1] = now, attempt
  row[ATTEMPT_ERROR.worker_id + 1], row[ATTEMPT_ERROR.type + 1] = worker or '', kind or ''
  row[ATTEMPT_ERROR.message + 1], row[ATTEMPT_ERROR.traceback + 1] = message, traceback or ''
  errors[#errors + 1] = row
  while #errors > ERRORS_KEPT do table.remove(errors, 1) end
  return cmsgpack.pack(errors)
end

-- A failed attempt: retry after base * 2^(attempts - 1) seconds (capped) while attempts
-- remain, else FAILED. Its error (`reason`, and the exception's type and traceback when
-- known) joins the task's `errors` (with_error). Returns the new state.
local function retry_or_fail(id, now, reason, retry, kind, traceback)
  local key = task_key(id)
  local f = redis.call('HMGET', key, 'tenant', 'attempts', 'max_retries', 'start_time', 'name',
    'worker_id', 'errors')
  local tenant, attempts, max_retries = f[1], (tonumber(f[2]) or 0) + 1, tonumber(f[3])
  local errors = with_error(f[7], now, attempts, f[6], kind, reason, traceback)
  if retry and (max_retries < 0 or attempts <= max_retries) then
    local delay = setting('retry_backoff_base') * 2 ^ (attempts - 1)
    if delay > setting('retry_backoff_max') then delay = setting('retry_backoff_max') end
    local ready_at = now + math.floor(delay * MICROS)
    redis.call('HSET', key, 'state', 'scheduled', 'attempts', attempts,
      'prev_start_time', f[4], 'last_error', reason, 'execute_after', ready_at, 'errors', errors)
    redis.call('ZADD', K.scheduled, ready_at, id)
    note_due(ready_at, now)
    due_in_lane(f[5] or '', ready_at)
    count('retried', tenant)
    return 'scheduled'
  end
  redis.call('HSET', key, 'attempts', attempts, 'prev_start_time', f[4], 'errors', errors)
  end_task(id, tenant, 'failed', now, reason)
  return 'failed'
end

-- Queues FAILED record `id` again now (say, after fixing what broke it). It keeps its
-- attempts and its dependents, which are released when it finishes.
local function requeue(id, kind, tenant, lane, priority, now)
  local key = task_key(id)
  redis.call('ZREM', K['state:failed'], id)
  redis.call('PERSIST', key)
  local start_time = next_tick(now)
  redis.call('HSET', key, 'state', 'queued', 'start_time', start_time)
  queue_ready(id, kind, tenant, lane, tonumber(priority), start_time)
  count('requeued', tenant)
end

-- For each row {id, lease token, ...} of the flat `rows` (read_rows) whose token still
-- holds the task's lease: calls handle(row, fields, kind, tenant), fields being the
-- task's `wanted` hash fields (then more: `wanted` gets the names of those), and drops
-- the lease. `row` is each_row's. Returns 1 (held) or 0 (lost) per row.
local function each_held_lease(rows, width, wanted, handle)
  local at, fields = #wanted, wanted
  fields[at + 1], fields[at + 2], fields[at + 3], fields[at + 4] = 'state', 'lease_token',
    'kind', 'tenant'
  fields[at + 5] = 'name'
  local held, unleased = {}, {}
  for i, row in each_row(rows, width) do
    local f = redis.call('HMGET', task_key(row[1]), unpack(fields))
    if f[at + 1] == 'started' and f[at + 2] == row[2] then
      unleased[#unleased + 1] = row[1]
      lease_ended(f[at + 3], f[at + 4], f[at + 5])
      handle(row, f, f[at + 3], f[at + 4])
      held[i] = 1
    else
      held[i] = 0
    end
  end
  if #unleased > 0 then call_chunked('ZREM', K.leases, unleased) end
  return held
end

-- The rows of a finish: `count` FINISH_ROW rows (id, lease token, result slot) one after
-- the other in MessagePack `packed`, and `results` results from ARGV[first_result] on (a slot k > 0
-- names the k-th, 0 none). Returns the flat rows (read_rows); or nil and the error reply,
-- before anything is written, for rows that do not match their count, a slot that names
-- no result, or a result over the size limit.
local function finish_rows(count, packed, first_result, results)
  local rows = read_rows(count, FINISH_ROW.WIDTH, packed)
  if rows == nil then return nil, redis.error_reply('INVALID tasks do not match their count') end
  for at = 1, #rows, FINISH_ROW.WIDTH do
    local slot = rows[at + FINISH_ROW.result_slot]
    if type(slot) ~= 'number' or slot < 0 or slot > results or slot % 1 ~= 0 then
      return nil, redis.error_reply('INVALID tasks row ' .. ((at - 1) / FINISH_ROW.WIDTH + 1) ..
        ' names result ' .. tostring(slot) .. ' of ' .. results)
    end
  end
  for i = first_result, first_result + results - 1 do
    local refused = too_big('result', ARGV[i])
    if refused then return nil, refused end
  end
  return rows
end

-- The fields finish_held reads of a task, in the order it reads them.
local FINISH_FIELDS = {'state', 'lease_token', 'kind', 'tenant', 'name', 'keep_result',
  'has_dependents'}

-- Acknowledges the rows of finish_rows as FINISHED at `now`, keeping a result where its
-- task asked for one (slot k: ARGV[first_result + k - 1]). Returns, per row, 1 if
-- finished or 0 if the caller no longer held its lease. It goes over the flat rows itself
-- (each_held_lease's iterator, closures and field list cost a one-task finish ~8k
-- instructions). A task that keeps no result is finished without a message on the
-- `ended` channel: queue.result refuses such a task before it would wait, so no one
-- waits for it (the message cost a one-task finish ~6k).
local function finish_held(rows, first_result, now)
  local held, unleased = {}, {}
  for at = 1, #rows, FINISH_ROW.WIDTH do
    local id = rows[at + FINISH_ROW.task_id]
    local f = redis.call('HMGET', task_key(id), unpack(FINISH_FIELDS))
    if f[1] == 'started' and f[2] == rows[at + FINISH_ROW.lease_token] then
      unleased[#unleased + 1] = id
      lease_ended(f[3], f[4], f[5])
      local keeps = f[6] == '1'
      end_task(id, f[4], 'finished', now, nil, not keeps)
      if f[7] then release_dependents(id, now) end
      local slot = rows[at + FINISH_ROW.result_slot]
      if slot > 0 and keeps and setting('finished_ttl') > 0 then
        redis.call('SET', result_key(id), ARGV[first_result + slot - 1], 'EX',
          math.ceil(setting('finished_ttl')))
      end
      held[#held + 1] = 1
    else
      held[#held + 1] = 0
    end
  end
  if #unleased > 0 then call_chunked('ZREM', K.leases, unleased) end
  return held
end

-- Drops the lease of task `id` if `token` still holds it; returns whether it did.
local function drop_lease(id, token)
  local f = redis.call('HMGET', task_key(id), 'state', 'lease_token', 'kind', 'tenant', 'name')
  if f[1] ~= 'started' or f[2] ~= token then return false end
  redis.call('ZREM', K.leases, id)
  lease_ended(f[3], f[4], f[5])
  return true
end

-- Writes everything this call accumulated (ready.lua's, then figures.lua's flush_counts)
-- and publishes the ids of the tasks it ended: every script that changes the fair queue
-- returns through here.
local function flush(now, reply)
  flush_ready(now)
  flush_running(now)
  flush_counts(now)
  if ended_ids then
    -- One message per call however many tasks ended: a MessagePack array of their ids.
    redis.call('SPUBLISH', PREFIX .. 'ended', cmsgpack.pack(ended_ids))
    ended_ids = nil
  end
  return reply
end
