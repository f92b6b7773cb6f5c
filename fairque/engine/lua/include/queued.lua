-- A tenant's queued tasks as one sequence, as lists show them and bulk operations walk
-- them: the critical lists, then priorities 5 to 1, each over its lanes in name order.

-- Appends the members of queue `key` (a list if `is_list`, else a sorted set) after its
-- first `skip` to `ids`, until `ids` holds `size`; returns what is left of `skip` for the
-- queues that follow.
local function take_queued(key, is_list, skip, ids, size)
  local n = is_list and redis.call('LLEN', key) or redis.call('ZCARD', key)
  if skip >= n then return skip - n end
  local last = skip + size - #ids - 1
  local members = is_list and redis.call('LRANGE', key, skip, last)
    or redis.call('ZRANGE', key, skip, last)
  for _, member in ipairs(members) do ids[#ids + 1] = member end
  return 0
end

-- Appends `tenant`'s queued tasks after its first `skip` to `ids`, until `ids` holds
-- `size`; only those of lane `lane` (a task name) if given. Returns what is left of `skip`.
local function take_tenant_queued(tenant, skip, ids, size, lane)
  local lanes
  if lane then
    lanes = redis.call('SISMEMBER', lanes_of_key(tenant), lane) == 1 and {lane} or {}
  else
    lanes = redis.call('SMEMBERS', lanes_of_key(tenant))
    table.sort(lanes)
  end
  for _, each in ipairs(lanes) do
    skip = take_queued(critical_key(tenant, each), true, skip, ids, size)
  end
  for priority = 5, 1, -1 do
    for _, each in ipairs(lanes) do
      if #ids >= size then return skip end
      skip = take_queued(normal_key(tenant, priority, each), false, skip, ids, size)
    end
  end
  return skip
end
