-- storage/plan: the board through which seed 004's Manager steers workers in other
-- processes (fairque/storage/plan.py): workers beat with a report, the Manager reads
-- the live workers' reports and publishes a plan, each worker reads its part. Workers
-- whose beat expired leave the registry and the plan first, whatever the operation.
-- storage:workers is a hash (worker id -> its last report, MessagePack), storage:beats a
-- zset (worker id by the time its beat expires, us, server clock), storage:plan a hash
-- (worker id -> MessagePack array of queue numbers).
-- KEYS: storage:workers storage:beats storage:plan
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the operation: beat, workers, publish or read
-- ARGV[3..] its arguments:
--   'beat' worker, report, ttl (us): keeps the report for ttl; returns the worker's plan
--     (MessagePack) or false.
--   'workers': returns the live workers' reports.
--   'publish' worker, plan, worker, plan, ...: replaces the plan; workers not alive are
--     left out. Returns how many were stored.
--   'read': returns worker, plan, worker, plan, ...
--@include base

local now = clock_now()
local gone = redis.call('ZRANGEBYSCORE', K['storage:beats'], '-inf', now)
if #gone > 0 then
  call_chunked('ZREM', K['storage:beats'], gone)
  call_chunked('HDEL', K['storage:workers'], gone)
  call_chunked('HDEL', K['storage:plan'], gone)
end

local op = ARGV[2]
if op == 'beat' then
  local worker = ARGV[3]
  redis.call('ZADD', K['storage:beats'], now + tonumber(ARGV[5]), worker)
  redis.call('HSET', K['storage:workers'], worker, ARGV[4])
  return redis.call('HGET', K['storage:plan'], worker)
elseif op == 'workers' then
  return redis.call('HVALS', K['storage:workers'])
elseif op == 'publish' then
  redis.call('DEL', K['storage:plan'])
  local stored = 0
  for i = 3, #ARGV, 2 do
    if redis.call('ZSCORE', K['storage:beats'], ARGV[i]) then
      redis.call('HSET', K['storage:plan'], ARGV[i], ARGV[i + 1])
      stored = stored + 1
    end
  end
  return stored
elseif op == 'read' then
  return redis.call('HGETALL', K['storage:plan'])
end
return redis.error_reply('INVALID op unknown operation ' .. tostring(op))
