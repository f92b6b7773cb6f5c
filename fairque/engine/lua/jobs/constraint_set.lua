-- jobs/constraint_set: create or replace a constraint, then move the ready strict jobs
-- into the partitions they now belong to (an operator call: it reads every ready job
-- once, so that dispatch never has to).
-- KEYS: ring ready scheduled leases stats clock state:deferred state:finished state:failed state:canceled strict:partitions constraints settings
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the constraint id
-- ARGV[3] its definition (MessagePack, see strict.lua), or '' to delete it
-- Returns the number of ready jobs that changed partition.
--@include ending

local cid, definition = ARGV[2], ARGV[3]
if definition == '' then
  redis.call('HDEL', K.constraints, cid)
  redis.call('DEL', running_key(cid), starts_key(cid))
else
  redis.call('HSET', K.constraints, cid, definition)
end
local constraints = redis.call('HGETALL', K.constraints)
local moved = 0
for _, partition in ipairs(redis.call('SMEMBERS', K['strict:partitions'])) do
  local _, name = split_partition(partition)
  local members = redis.call('ZRANGE', strict_key(partition), 0, -1)
  for _, member in ipairs(members) do
    local id = string.sub(member, 17)
    local key = task_key(id)
    local now_in = partition_of(name, redis.call('HGET', key, 'payload'), constraints)
    if now_in ~= partition then
      redis.call('ZREM', strict_key(partition), member)
      redis.call('HSET', key, 'partition', now_in)
      queue_strict(id)
      moved = moved + 1
    end
  end
end
return moved
