-- jobs/list: one page of the ids in a state, for the Web UI (seed 003).
-- Queued jobs are read from the strict partitions (of that name only), in partition
-- order; the other states from their registry, newest first, and filtered by name, so a
-- page may hold fewer than asked.
-- KEYS: scheduled leases state:finished state:failed state:canceled strict:partitions
-- FLAGS: no-writes
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the state (queued, scheduled, started, finished, failed, canceled)
-- ARGV[3] the job name ('' any)
-- ARGV[4] the cursor (0 first)
-- ARGV[5] how many entries to look at
-- Returns {next cursor (0: end), then per job: id, name, state, priority, attempts,
-- created_at}.
--@include strict

local state, name = ARGV[2], ARGV[3]
local cursor, size = tonumber(ARGV[4]), tonumber(ARGV[5])
local ids = {}

local FIELDS = {'name', 'state', 'priority', 'attempts', 'created_at'}
local function page(next_cursor) return task_rows(next_cursor, ids, FIELDS) end

if state == 'queued' then
  local partitions = redis.call('SMEMBERS', K['strict:partitions'])
  table.sort(partitions)
  local skip, total = cursor, 0
  for _, partition in ipairs(partitions) do
    local _, partition_name = split_partition(partition)
    if name == '' or partition_name == name then
      local n = redis.call('ZCARD', strict_key(partition))
      total = total + n
      if skip >= n then
        skip = skip - n
      elseif #ids < size then
        local members = redis.call('ZRANGE', strict_key(partition), skip, skip + size - #ids - 1)
        for _, member in ipairs(members) do ids[#ids + 1] = string.sub(member, 17) end
        skip = 0
      end
    end
  end
  local next_cursor = cursor + #ids
  if next_cursor >= total then next_cursor = 0 end
  return page(next_cursor)
end

local registry = ({scheduled = K.scheduled, started = K.leases, finished = K['state:finished'],
  failed = K['state:failed'], canceled = K['state:canceled']})[state]
local members = redis.call('ZREVRANGE', registry, cursor, cursor + size - 1)
for _, id in ipairs(members) do
  if name == '' or redis.call('HGET', task_key(id), 'name') == name then ids[#ids + 1] = id end
end
local next_cursor = cursor + #members
if #members < size then next_cursor = 0 end
return page(next_cursor)
