-- tasks: one page of the tasks and jobs in a state, for the Web UI.
-- Queued tasks are read tenant by tenant (the busiest first; in each, the critical lists,
-- then priorities 5 to 1, each over its lanes in name order), then the strict jobs' partitions (when no tenant is asked for);
-- deferred tasks by SSCAN; the other states from their registry, newest first. Entries
-- are filtered by tenant and name after reading: a filtered list of a registry or of the
-- deferred tasks reads on until its page is full or it has looked at LOOK entries, so a
-- page holds fewer than asked only where the list ends or matches are rare. Queued tasks
-- of a tenant are read from its own queues (of a name: from that lane's).
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
--@include queued

local state, tenant, name = ARGV[2], ARGV[3], ARGV[4]
local cursor, size = tonumber(ARGV[5]), tonumber(ARGV[6])
local ids = {}
-- Entries a filtered page looks at, at most: ~10 ms of the server's time.
local LOOK = 5000
local filtered = tenant ~= '' or name ~= ''

local FIELDS = {'tenant', 'name', 'state', 'priority', 'attempts', 'created_at', 'worker_id',
  'last_error'}
local function listed(f)
  return (tenant == '' or f[1] == tenant) and (name == '' or f[2] == name)
end
local function page(next_cursor) return task_rows(next_cursor, ids, FIELDS, listed) end

-- A page read in slices by `read(at, count)` (ids and the cursor after them) from
-- `cursor`, `size` entries at first, on while filtered and the page is not full; a reply
-- as task_rows makes it. The page ends at the last entry kept when it fills mid-slice,
-- except for a set scan, whose cursor cannot point inside a slice (its page may hold a
-- few more than asked).
local function filled(read, within_slice)
  local reply, kept, looked, at = {0}, 0, 0, cursor
  local budget = filtered and math.max(LOOK, size) or size
  while true do
    local count = math.min(size, budget - looked)
    local slice, after = read(at, count)
    for i, id in ipairs(slice) do
      local f = redis.call('HMGET', task_key(id), unpack(FIELDS))
      if listed(f) then
        reply[#reply + 1] = id
        for j = 1, #FIELDS do reply[#reply + 1] = f[j] end
        kept = kept + 1
        if kept >= size and within_slice and i < #slice then
          reply[1] = at + i
          return reply
        end
      end
    end
    looked = looked + #slice
    if after == 0 then return reply end
    at = after
    if kept >= size or looked >= budget then
      reply[1] = at
      return reply
    end
  end
end

if state == 'deferred' then
  return filled(function(at, count)
    local scan = redis.call('SSCAN', K['state:deferred'], at, 'COUNT', count)
    return scan[2], tonumber(scan[1])
  end, false)
end

local registry = ({scheduled = K.scheduled, started = K.leases, finished = K['state:finished'],
  failed = K['state:failed'], canceled = K['state:canceled']})[state]
if registry then
  return filled(function(at, count)
    local slice = redis.call('ZREVRANGE', registry, at, at + count - 1)
    return slice, #slice < count and 0 or at + #slice
  end, true)
end

-- Queued: a tenant's ready queues form one sequence (include/queued.lua); the cursor
-- walks past the entries of earlier pages, whole queues at a time. The walk ends when the
-- page is full, so a full page's cursor may lead to an empty last page.
if tenant ~= '' then
  take_tenant_queued(tenant, cursor, ids, size, name ~= '' and name or nil)
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
    take_tenant_queued(t, offset, ids, size)
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
    take_queued(strict_key(partition), false, offset, ids, size)
  end
  -- Strict members are the 16-digit enqueue tick followed by the id.
  for i = before + 1, #ids do ids[i] = string.sub(ids[i], 17) end
  if #ids >= size then return page_at(index, offset, #ids - before) end
  index, offset = index + 1, 0
end
return page(0)
