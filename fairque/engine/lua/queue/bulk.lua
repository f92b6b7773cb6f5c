-- bulk: one batch of a bulk operation on the fair-queue tasks in a state, of a tenant,
-- a name and an age if given: count them, queue failed ones again, cancel waiting ones
-- (and their dependents), delete ended ones. It looks at a bounded slice of where tasks
-- in the state are kept, so no call holds the server long; the caller (fairque/queue/
-- calls/bulk.py) sends the next batch from the cursor until the state is done.
-- A task that ended (or was created, for a waiting state) after the operation's first
-- batch, `as_of`, is not selected: a task retried that fails again while the operation
-- runs is not retried twice, and the operation ends however busy the queue is.
-- KEYS: scheduled leases stats clock state:deferred state:finished state:failed state:canceled strict:partitions constraints settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the operation: count, retry (failed), cancel (queued, scheduled, deferred) or delete (finished, failed, canceled)
-- ARGV[3] the state
-- ARGV[4] the tenant ('' any; queued tasks are walked per tenant, so one is needed)
-- ARGV[5] the name ('' any)
-- ARGV[6] the age: only tasks that ended (were created, if waiting) this many us before as_of or earlier
-- ARGV[7] as_of, the server time of the operation's first batch (us; 0: this is the first)
-- ARGV[8] the cursor (0 first)
-- ARGV[9] how many entries to look at
-- Returns {1 when the state's entries are all looked at, else 0; the next cursor; as_of;
-- entries looked at; tasks selected (and acted on, unless counted); entries in the state}.
--@include cancel
--@include queued

local operation, state, tenant, name = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
-- A position past 2^53 is past any registry's end (and Lua would write it as 1e+19).
local cursor, size = math.min(tonumber(ARGV[8]), 2 ^ 53), tonumber(ARGV[9])
local now = clock_now()
local as_of = tonumber(ARGV[7])
if as_of == 0 then as_of = now end
local before = as_of - tonumber(ARGV[6])
local ended = state == 'finished' or state == 'failed' or state == 'canceled'
local FIELDS = {'state', 'kind', 'tenant', 'name', ended and 'finished_at' or 'created_at',
  'priority'}

local function selected(f)
  return f[1] == state and f[2] == 'task' and (tenant == '' or f[3] == tenant)
    and (name == '' or (f[4] or '') == name) and (tonumber(f[5]) or 0) <= before
end

local function act(id, f)
  if operation == 'retry' then
    requeue(id, f[2], f[3], f[4] or '', f[6], now)
  elseif operation == 'cancel' then
    cancel_with_dependents(id, 'canceled in bulk', now, false)
  elseif operation == 'delete' then
    redis.call('ZREM', ended_registry(state), id)
    -- A failed task's dependents still wait for it: they can never run now.
    cancel_dependents(id, 'deleted', now)
    redis.call('DEL', task_key(id), result_key(id))
  end
end

-- Visits `ids`; returns how many were selected.
local function visit(ids)
  local matched = 0
  for _, id in ipairs(ids) do
    local f = redis.call('HMGET', task_key(id), unpack(FIELDS))
    if selected(f) then
      matched = matched + 1
      if operation ~= 'count' then act(id, f) end
    end
  end
  return matched
end

-- Acted on, a task leaves where its state keeps it: the next slice starts that much
-- earlier.
local function reply(ids, matched, total)
  local gone = operation == 'count' and 0 or matched
  local done = #ids < size
  return flush(now, {done and 1 or 0, done and 0 or cursor + #ids - gone, as_of, #ids, matched,
    total})
end

if state == 'deferred' then
  -- A set scan, whose cursor holds across changes; kept as text, as it may pass 2^53.
  local scan = redis.call('SSCAN', K['state:deferred'], ARGV[8], 'COUNT', size)
  local matched = visit(scan[2])
  return flush(now, {scan[1] == '0' and 1 or 0, scan[1], as_of, #scan[2], matched,
    redis.call('SCARD', K['state:deferred'])})
end

if state == 'queued' then
  local ids = {}
  take_tenant_queued(tenant, cursor, ids, size, name ~= '' and name or nil)
  local total = tonumber(redis.call('ZSCORE', K['ready:tenants'], tenant)) or 0
  return reply(ids, visit(ids), total)
end

-- The oldest first: a registry's score is when its entry expires, or when a scheduled
-- task is due.
local registry = state == 'scheduled' and K.scheduled or ended_registry(state)
local ids = redis.call('ZRANGE', registry, cursor, cursor + size - 1)
local matched = visit(ids)
return reply(ids, matched, redis.call('ZCARD', registry))
