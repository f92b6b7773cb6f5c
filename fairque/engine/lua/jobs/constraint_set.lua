-- jobs/constraint_set: create, replace or delete a constraint, then apply it to the jobs
-- it may concern: the ready jobs move to the partitions they now belong to, and the
-- running jobs count against the constraints they now match (and no longer against the
-- others). Jobs in any other state (scheduled for a retry, failed, deferred) follow when
-- they are queued again (queue_strict in include/strict.lua). An operator call: it reads
-- every ready and running job once, so that dispatch never has to.
-- KEYS: leases strict:partitions constraints
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the constraint id
-- ARGV[3] its definition (MessagePack, see strict.lua), or '' to delete it
-- Returns the number of ready jobs that changed partition.
--@include strict

local cid, definition = ARGV[2], ARGV[3]
if definition == '' then
  redis.call('HDEL', K.constraints, cid)
  redis.call('DEL', running_key(cid), starts_key(cid))
else
  redis.call('HSET', K.constraints, cid, definition)
end
redis.call('HINCRBY', K.constraints, VERSION, 1)
local constraints, version = current_constraints()

local moved = 0
for _, partition in ipairs(redis.call('SMEMBERS', K['strict:partitions'])) do
  local _, name = split_partition(partition)
  local members = redis.call('ZRANGE', strict_key(partition), 0, -1)
  for _, member in ipairs(members) do
    local id = string.sub(member, 17)
    local key = task_key(id)
    local now_in = partition_of(name, redis.call('HGET', key, 'payload'), constraints)
    redis.call('HSET', key, 'partition', now_in, 'constraints_version', version)
    if now_in ~= partition then
      redis.call('ZREM', strict_key(partition), member)
      queue_strict(id)
      moved = moved + 1
    end
  end
end

-- Running jobs (the leases of every kind; only strict jobs have constraints).
local function set_of(list)
  local set = {}
  for _, item in ipairs(list) do set[item] = true end
  return set
end
local rated = {}
for i = 1, #constraints, 2 do rated[constraints[i]] = read_constraint(constraints[i + 1]).rate > 0 end
for _, id in ipairs(redis.call('ZRANGE', K.leases, 0, -1)) do
  local key = task_key(id)
  local f = redis.call('HMGET', key, 'kind', 'partition', 'name', 'lease_deadline', 'leased_at',
    'lease_token')
  if f[1] == 'job' then
    local now_in = partition_of(f[3], redis.call('HGET', key, 'payload'), constraints)
    local was, is = split_partition(f[2]), split_partition(now_in)
    local was_in, is_in = set_of(was), set_of(is)
    for _, old in ipairs(was) do
      if not is_in[old] then redis.call('ZREM', running_key(old), id) end
    end
    for _, new in ipairs(is) do
      if not was_in[new] then
        -- It started before this constraint applied to it: it runs, and it counts.
        redis.call('ZADD', running_key(new), f[4], id)
        if rated[new] then redis.call('ZADD', starts_key(new), f[5], f[6]) end
      end
    end
    redis.call('HSET', key, 'partition', now_in, 'constraints_version', version)
  end
end
return moved
