-- tasks: one page of the tasks and jobs in a state, for the Web UI.
-- Queued tasks are read tenant by tenant (the busiest first; in each, the critical lists,
-- then priorities 5 to 1, each over its lanes in name order), then the strict jobs' partitions (when no tenant is asked for);
-- deferred tasks by SSCAN; the other states from their registry, newest first. Entries
-- are filtered by tenant and name after reading, so a page may hold fewer than asked.
-- KEYS: scheduled leases state:deferred state:finished state:failed state:canceled strict:partitions ready:tenants
-- FLAGS: no-writes
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the state (scheduled, deferred, queued, started, finished, failed, canceled)
-- ARGV[3] the tenant ('' any)
-- ARGV[4] the name ('' any)
-- ARGV[5] the cursor (0 first)
-- ARGV[6] how many entries to look at
-- Returns {next cursor (0: end), then per task: id, tenant, name, state, priority,
-- attempts, created_at, worker_id, last_error}.
--@include strict

local state, tenant, name = ARGV[2], ARGV[3], ARGV[4]
local cursor, size = tonumber(ARGV[5]), tonumber(ARGV[6])
local ids = {}

local FIELDS = {'tenant', 'name', 'state', 'priority', 'attempts', 'created_at', 'worker_id',
  'last_error'}
local function listed(f)
  return (tenant == '' or f[1] == tenant) and (name == '' or f[2] == name)
end
local function page(next_cursor) return task_rows(next_cursor, ids, FIELDS, listed) end

if state == 'deferred' then
  local scan = redis.call('SSCAN', K['state:deferred'], cursor, 'COUNT', size)
  ids = scan[2]
  return page(tonumber(scan[1]))
end

local registry = ({scheduled = K.scheduled, started = K.leases, finished = K['state:finished'],
  failed = K['state:failed'], canceled = K['state:canceled']})[state]
if registry then
  ids = redis.call('ZREVRANGE', registry, cursor, cursor + size - 1)
  if #ids < size then return page(0) end
  return page(cursor + #ids)
end

-- Queued: a tenant's ready queues form one sequence; `skip` walks past the entries of
-- earlier pages, whole queues at a time. The walk ends when the page is full, so a full
-- page's cursor may lead to an empty last page.
local skip = cursor
local function take(key, is_list)
  local n = is_list and redis.call('LLEN', key) or redis.call('ZCARD', key)
  if skip >= n then
    skip = skip - n
  else
    local last = skip + size - #ids - 1
    local members = is_list and redis.call('LRANGE', key, skip, last)
      or redis.call('ZRANGE', key, skip, last)
    for _, member in ipairs(members) do ids[#ids + 1] = member end
    skip = 0
  end
end

local function take_tenant(t)
  local lanes = redis.call('SMEMBERS', lanes_of_key(t))
  table.sort(lanes)
  for _, lane in ipairs(lanes) do take(critical_key(t, lane), true) end
  for priority = 5, 1, -1 do
    for _, lane in ipairs(lanes) do
      if #ids >= size then return end
      take(normal_key(t, priority, lane), false)
    end
  end
end

if tenant ~= '' then
  take_tenant(tenant)
  if #ids < size then return page(0) end
  return page(cursor + #ids)
end

-- Every tenant's queues, the busiest tenant first, then the strict partitions (by name).
-- The cursor is a spot, index * OFFSETS + entries there already listed, where the index
-- is a tenant's rank in K['ready:tenants'], or TENANT_SPOTS + a partition's position: so a page
-- costs O(log tenants + page) whatever the number of tenants. Ranks move as tasks come
-- and go, so a tenant may be listed twice or skipped between pages; tenants ranked
-- beyond TENANT_SPOTS are not listed.
local OFFSETS, TENANT_SPOTS = 2 ^ 31, 2 ^ 21
local index, offset = math.floor(cursor / OFFSETS), cursor % OFFSETS
local function page_at(spot, first, taken)
  local listed = first + taken
  if listed >= OFFSETS then return page((spot + 1) * OFFSETS) end
  return page(spot * OFFSETS + listed)
end
while index < TENANT_SPOTS do
  local ranked = redis.call('ZREVRANGE', K['ready:tenants'], index, index + size - 1)
  if #ranked == 0 then break end
  for _, t in ipairs(ranked) do
    local before = #ids
    skip = offset
    take_tenant(t)
    if #ids >= size then return page_at(index, offset, #ids - before) end
    index, offset = index + 1, 0
  end
end
local partitions = redis.call('SMEMBERS', K['strict:partitions'])
table.sort(partitions)
index = math.max(index, TENANT_SPOTS)
while index - TENANT_SPOTS < #partitions do
  local partition = partitions[index - TENANT_SPOTS + 1]
  local _, partition_name = split_partition(partition)
  local before = #ids
  if name == '' or partition_name == name then
    skip = offset
    take(strict_key(partition), false)
  end
  -- Strict members are the 16-digit enqueue tick followed by the id.
  for i = before + 1, #ids do ids[i] = string.sub(ids[i], 17) end
  if #ids >= size then return page_at(index, offset, #ids - before) end
  index, offset = index + 1, 0
end
return page(0)
