-- Seed 004's storage inside Tarantool: every operation is one call of the persistent
-- function `fairque_storage(op, namespace, ...)`, run in one memtx transaction, so it is
-- atomic like the Redis scripts. Times are microseconds since the epoch, from the
-- server's clock (never the client's), held in Lua numbers (exact below 2^53).
--
-- This chunk returns that function. Its op 'install' creates the spaces and stores the
-- chunk's source as the body of the persistent function, so it survives restarts and
-- clients of every process call the same code: fairque's instance file runs it when the
-- server starts, and each client tries it once (fairque/storage/tarantool.py), which a
-- user without admin rights may not (then the installed function is used).
--
-- Tasks: one tuple each in `fairque_tasks`, by namespace and id (ids count per namespace
-- in `fairque_ids`, as on Redis); `state` is 'queued' (ready, or delayed while
-- its start is in the future) or 'taken' (leased until `deadline`). Expired leases are
-- returned by the calls that read them (get, retry, stat), as the Redis scripts do, so
-- no background fiber is needed and a restarted server needs no recovery step.
-- Workers and the Manager's plan (fairque/storage/plan.py): `fairque_workers` holds each
-- worker's last report until its beat expires; `fairque_plans` the queue each of its
-- processors should serve.

local clock = require('clock')

local MICROS = 1000000
local MAX_QUEUE_NUM = 2147483647
local REAP_LIMIT = 10000 -- expired leases returned per call (the rest by the next calls)

local function now_us() return tonumber(clock.realtime64() / 1000ULL) end

-- MessagePack integers from about 2^50 on arrive as 64-bit cdata (microsecond times do);
-- as Lua numbers they stay exact below 2^53, and compare and add like the others.
local function int(x)
  if type(x) == 'cdata' then return tonumber(x) end
  return x
end

local function invalid(field, text) error('INVALID ' .. field .. ' ' .. text, 0) end

local function check_queue(n)
  if type(n) ~= 'number' or n < 0 or n > MAX_QUEUE_NUM or n % 1 ~= 0 then
    invalid('queue_num', 'must be an integer from 0 to ' .. MAX_QUEUE_NUM)
  end
end

local function tasks() return box.space.fairque_tasks end
local function payloads() return box.space.fairque_payloads end

-- A take, a retry or a lease's expiry rewrites the task's tuple. Payloads up to this
-- many bytes stay in it (one tuple per task: the cheapest); larger ones go to
-- `fairque_payloads` and the task's `data` is `true`, so that rewriting a task never
-- needs memory for more than this.
local INLINE_MAX = 1024

local function out_of_memory(err)
  return tostring(err):find('Failed to allocate', 1, true) ~= nil
end

-- A rewrite still needs a free slot of its tuple's size, which a store full of small
-- tasks may not have. So about 1 MiB is kept in reserve, as rows of `fairque_reserve`:
-- a put is refused (FULL) unless the reserve is whole, and a rewrite that runs out of
-- memory frees the reserve and runs once more. Rows of 1,000 bytes fill slabs of
-- 128 KiB, which the allocator gives back for tuples of any size once emptied.
local RESERVE_ROWS, RESERVE_ROW_BYTES = 1024, 1000

-- The deadline of a task that is not taken: any value would do, and this one takes as
-- many bytes as a real deadline (MessagePack writes integers from 2^32 in 9), so a take
-- leaves the tuple's size alone (but for the state's name) and its new version most
-- likely fits where the old one was.
local NO_DEADLINE = 4294967296

local function reserve() return box.space.fairque_reserve end

-- Makes the reserve whole again if it was freed; false if there is no room for it.
local function keep_reserve()
  local have = reserve():len()
  if have >= RESERVE_ROWS then return true end
  local row = string.rep('r', RESERVE_ROW_BYTES)
  return (pcall(box.atomic, function()
    for i = have + 1, RESERVE_ROWS do reserve():replace({i, row}) end
  end))
end

-- Frees the reserve (committed, so its rows are gone when this returns).
local function free_reserve()
  local keys = {}
  for _, t in reserve():pairs() do keys[#keys + 1] = t[1] end
  box.atomic(function()
    for _, key in ipairs(keys) do reserve():delete(key) end
  end)
end

-- Runs `work` (...) in a transaction that rewrites tuples; if it runs out of memory,
-- frees the reserve and runs it once more. A deleted or rewritten tuple's memory is
-- freed only once no Lua value holds it (the rows iterated above, the old versions of
-- the tasks earlier calls rewrote): a full collection lets go of those first.
local function with_room(work, ...)
  local ok, result = pcall(box.atomic, work, ...)
  if ok then return result end
  if not out_of_memory(result) then error(result) end
  free_reserve()
  collectgarbage('collect')
  return box.atomic(work, ...)
end

-- Taken tasks whose visibility timeout is over go back to their queue, available now:
-- attempts + 1, prev_start_time = the start they were taken at (seed 004's table).
local function reap(ns, now)
  local expired = {}
  for _, t in tasks().index.lease:pairs({ns, 'taken'}, {iterator = 'GE'}) do
    if t.ns ~= ns or t.state ~= 'taken' or t.deadline > now or #expired >= REAP_LIMIT then
      break
    end
    expired[#expired + 1] = t
  end
  for _, t in ipairs(expired) do
    tasks():update({ns, t.id}, {{'=', 'state', 'queued'}, {'=', 'deadline', NO_DEADLINE},
      {'+', 'attempts', 1}, {'=', 'prev', t.start}, {'=', 'start', now}})
  end
end

local ops = {}

-- Ids count per namespace, as on Redis: one counter update per call.
local function insert_tasks(ns, rows, now)
  local counter = box.space.fairque_ids:get(ns)
  local last = counter == nil and 0 or counter.last
  local ids = {}
  local space, payload_space = tasks(), payloads()
  for i, row in ipairs(rows) do
    local start = now
    if row[2] == 1 then start = row[3] elseif row[2] == 2 then start = now + row[3] end
    ids[i] = last + i
    local data = row[4]
    if #data > INLINE_MAX then
      payload_space:insert({ns, ids[i], data})
      data = true -- kept apart
    end
    space:insert({ns, ids[i], row[1], 'queued', start, NO_DEADLINE, now, box.NULL, 0, data})
  end
  box.space.fairque_ids:replace({ns, last + #rows})
  return ids
end

-- rows: {queue, how, when, data}: how 0 = now, 1 = at `when` (absolute us), 2 = `when`
-- us from now. All of them or none. Returns the ids, in order.
function ops.put(ns, rows)
  for i, row in ipairs(rows) do
    check_queue(row[1])
    row[3] = int(row[3])
    if type(row[2]) ~= 'number' or type(row[3]) ~= 'number' or type(row[4]) ~= 'string' then
      invalid('requests', 'row ' .. i .. ' is not {queue, how, when, data}')
    end
  end
  if not keep_reserve() then error('FULL ' .. box.cfg.memtx_memory, 0) end
  local ok, ids = pcall(box.atomic, insert_tasks, ns, rows, now_us())
  if not ok then
    if out_of_memory(ids) then error('FULL ' .. box.cfg.memtx_memory, 0) end
    error(ids, 0)
  end
  return ids
end

local function payload(t)
  if t.data ~= true then return t.data end
  return payloads():get({t.ns, t.id}).data
end

-- Up to `count` ready tasks of `queue`, oldest start first, leased for `visibility` us.
-- Returns rows {id, data, attempts, created_at, start_time, prev_start_time or nil}.
function ops.get(ns, queue, count, visibility)
  check_queue(queue)
  local now = now_us()
  return with_room(function()
    reap(ns, now)
    local ready = {}
    for _, t in tasks().index.queue:pairs({ns, queue, 'queued'}, {iterator = 'GE'}) do
      if #ready >= count or t.ns ~= ns or t.queue ~= queue or t.state ~= 'queued'
          or t.start > now then
        break
      end
      ready[#ready + 1] = t
    end
    local rows = {}
    for i, t in ipairs(ready) do
      local deadline = now + int(visibility)
      tasks():update({ns, t.id}, {{'=', 'state', 'taken'}, {'=', 'deadline', deadline}})
      local prev = t.prev
      if prev == nil then prev = box.NULL end -- keeps its place in the row
      rows[i] = {t.id, payload(t), t.attempts, t.created, t.start, prev}
    end
    return rows
  end)
end

-- Removes the namespace's tasks among `ids`, whatever their state; returns how many.
function ops.done(ns, ids)
  return box.atomic(function()
    local removed = 0
    local space, payload_space = tasks(), payloads()
    for _, id in ipairs(ids) do
      local t = space:delete({ns, id})
      if t ~= nil then
        removed = removed + 1
        if t.data == true then payload_space:delete({ns, id}) end
      end
    end
    return removed
  end)
end

-- rows: {id, next start (us)}. Taken tasks go back, available at their next start:
-- attempts + 1, prev_start_time = the start they were taken at. Returns how many.
function ops.retry(ns, rows)
  local now = now_us()
  return with_room(function()
    reap(ns, now) -- a retry after the visibility timeout finds the task returned already
    local returned = 0
    for _, row in ipairs(rows) do
      local t = tasks():get({ns, row[1]})
      if t ~= nil and t.state == 'taken' then
        tasks():update({ns, t.id}, {{'=', 'state', 'queued'}, {'=', 'deadline', NO_DEADLINE},
          {'+', 'attempts', 1}, {'=', 'prev', t.start}, {'=', 'start', int(row[2])}})
        returned = returned + 1
      end
    end
    return returned
  end)
end

-- Per queue holding tasks: {queue, total, ready, taken, delayed}.
function ops.stat(ns)
  local now = now_us()
  with_room(reap, ns, now)
  local index = tasks().index.queue
  local rows = {}
  local first = index:select({ns}, {iterator = 'GE', limit = 1})[1]
  while first ~= nil and first.ns == ns do
    local queue = first.queue
    local queued = index:count({ns, queue, 'queued'})
    local taken = index:count({ns, queue, 'taken'})
    local delayed = 0 -- counted from the latest start down: usually the fewer
    for _, t in index:pairs({ns, queue, 'queued'}, {iterator = 'LE'}) do
      if t.ns ~= ns or t.queue ~= queue or t.state ~= 'queued' or t.start <= now then break end
      delayed = delayed + 1
    end
    rows[#rows + 1] = {queue, queued + taken, queued - delayed, taken, delayed}
    first = index:select({ns, queue}, {iterator = 'GT', limit = 1})[1]
  end
  return rows
end

-- Workers whose beat expired leave the registry and the plan.
local function drop_expired(ns, now)
  local gone = {}
  for _, w in box.space.fairque_workers:pairs({ns}, {iterator = 'EQ'}) do
    if w.expires <= now then gone[#gone + 1] = w.worker end
  end
  for _, worker in ipairs(gone) do
    box.space.fairque_workers:delete({ns, worker})
    box.space.fairque_plans:delete({ns, worker})
  end
end

-- A worker's beat: its report is kept for `ttl` us. Returns its plan (nil: none).
function ops.beat(ns, worker, report, ttl)
  local now = now_us()
  box.atomic(function()
    drop_expired(ns, now)
    box.space.fairque_workers:replace({ns, worker, now + int(ttl), report})
  end)
  local plan = box.space.fairque_plans:get({ns, worker})
  if plan == nil then return box.NULL end
  return plan.queues
end

-- The reports of the live workers.
function ops.workers(ns)
  local now = now_us()
  box.atomic(drop_expired, ns, now)
  local reports = {}
  for _, w in box.space.fairque_workers:pairs({ns}, {iterator = 'EQ'}) do
    reports[#reports + 1] = w.report
  end
  return reports
end

-- Replaces the plan with `plan` ({worker, queues} rows); workers not registered (gone
-- meanwhile) are left out. Returns how many workers have a plan.
function ops.publish(ns, plan)
  local now = now_us()
  return box.atomic(function()
    drop_expired(ns, now)
    local old = {}
    for _, p in box.space.fairque_plans:pairs({ns}, {iterator = 'EQ'}) do
      old[#old + 1] = p.worker
    end
    for _, worker in ipairs(old) do box.space.fairque_plans:delete({ns, worker}) end
    local stored = 0
    for _, row in ipairs(plan) do
      if box.space.fairque_workers:get({ns, row[1]}) ~= nil then
        box.space.fairque_plans:replace({ns, row[1], row[2]})
        stored = stored + 1
      end
    end
    return stored
  end)
end

-- The plan: {worker, queues} rows of the live workers.
function ops.plan(ns)
  local now = now_us()
  box.atomic(drop_expired, ns, now)
  local rows = {}
  for _, p in box.space.fairque_plans:pairs({ns}, {iterator = 'EQ'}) do
    rows[#rows + 1] = {p.worker, p.queues}
  end
  return rows
end

-- The persistent function's body: this chunk's `source`, loaded on the first call (a
-- body is evaluated where `require` is not available yet), in a long bracket no line of
-- the source closes.
local function function_body(name, source)
  local level = 1
  while source:find(']' .. string.rep('=', level) .. ']', 1, true) do level = level + 1 end
  local bracket = string.rep('=', level)
  return '(function() local run; return function(...) if run == nil then run = assert('
    .. 'loadstring([' .. bracket .. '[' .. source .. ']' .. bracket .. "], '=" .. name
    .. "'))() end return run(...) end end)()"
end

-- Creates what is missing and stores this chunk (`source`) as the function `name`
-- (replacing an older body: a new fairque version brings new procedures). Run with admin
-- rights: by the instance file when it starts, or by a client's eval.
local function install(name, source)
  local body = function_body(name, source)
  local space = box.schema.space.create('fairque_tasks', {if_not_exists = true, format = {
    {name = 'ns', type = 'string'},
    {name = 'id', type = 'unsigned'},
    {name = 'queue', type = 'unsigned'},
    {name = 'state', type = 'string'},
    {name = 'start', type = 'integer'},
    {name = 'deadline', type = 'integer'},
    {name = 'created', type = 'integer'},
    {name = 'prev', type = 'integer', is_nullable = true},
    {name = 'attempts', type = 'unsigned'},
    {name = 'data', type = 'any'},
  }})
  space:create_index('primary', {if_not_exists = true, parts = {
    {field = 'ns', type = 'string'}, {field = 'id', type = 'unsigned'}}})
  local payloads = box.schema.space.create('fairque_payloads', {if_not_exists = true,
    format = {{name = 'ns', type = 'string'}, {name = 'id', type = 'unsigned'},
              {name = 'data', type = 'string'}}})
  -- Found by key only, never in order: a hash index, cheaper than a tree for that.
  payloads:create_index('primary', {if_not_exists = true, type = 'hash', parts = {
    {field = 'ns', type = 'string'}, {field = 'id', type = 'unsigned'}}})
  local kept = box.schema.space.create('fairque_reserve', {if_not_exists = true,
    format = {{name = 'row', type = 'unsigned'}, {name = 'filler', type = 'string'}}})
  kept:create_index('primary', {if_not_exists = true, parts = {{field = 'row', type = 'unsigned'}}})
  local ids = box.schema.space.create('fairque_ids', {if_not_exists = true, format = {
    {name = 'ns', type = 'string'}, {name = 'last', type = 'unsigned'}}})
  ids:create_index('primary', {if_not_exists = true, parts = {{field = 'ns', type = 'string'}}})
  space:create_index('queue', {if_not_exists = true, unique = true, parts = {
    {field = 'ns', type = 'string'}, {field = 'queue', type = 'unsigned'},
    {field = 'state', type = 'string'}, {field = 'start', type = 'integer'},
    {field = 'id', type = 'unsigned'}}})
  space:create_index('lease', {if_not_exists = true, unique = true, parts = {
    {field = 'ns', type = 'string'}, {field = 'state', type = 'string'},
    {field = 'deadline', type = 'integer'}, {field = 'id', type = 'unsigned'}}})
  local workers = box.schema.space.create('fairque_workers', {if_not_exists = true, format = {
    {name = 'ns', type = 'string'}, {name = 'worker', type = 'string'},
    {name = 'expires', type = 'integer'}, {name = 'report', type = 'any'}}})
  workers:create_index('primary', {if_not_exists = true, parts = {
    {field = 'ns', type = 'string'}, {field = 'worker', type = 'string'}}})
  local plans = box.schema.space.create('fairque_plans', {if_not_exists = true, format = {
    {name = 'ns', type = 'string'}, {name = 'worker', type = 'string'},
    {name = 'queues', type = 'array'}}})
  plans:create_index('primary', {if_not_exists = true, parts = {
    {field = 'ns', type = 'string'}, {field = 'worker', type = 'string'}}})
  local stored = box.space._func.index.name:get(name)
  if stored ~= nil and stored.body == body and stored.setuid == 1 then return false end
  -- A function's rights go with it: those who may call this one may call the new one.
  local callers = {}
  if stored ~= nil then
    for _, right in box.space._priv.index.object:pairs({'function', stored.id}) do
      callers[#callers + 1] = box.space._user:get(right.grantee)
    end
    box.schema.func.drop(name)
  end
  -- setuid: it runs with its creator's rights, so a client user needs nothing but the
  -- right to execute it (box.schema.user.grant(user, 'execute', 'function', name)).
  box.schema.func.create(name, {body = body, setuid = true})
  for _, caller in ipairs(callers) do
    box.schema[caller.type].grant(caller.name, 'execute', 'function', name, {if_not_exists = true})
  end
  return true
end

return function(op, ...)
  if op == 'install' then return install(...) end
  local run = ops[op]
  if run == nil then error('INVALID op unknown operation ' .. tostring(op), 0) end
  return run(...)
end
