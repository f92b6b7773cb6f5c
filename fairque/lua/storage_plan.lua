-- storage_plan: the board through which seed 004's Manager steers workers in other
-- processes (fairque/storage/plan.py): workers beat with a report, the Manager reads
-- the live workers' reports and publishes a plan, each worker reads its part.
-- KEYS: the fixed keys, the storage keys, then storage:workers (hash: worker id -> its
-- last report, MessagePack), storage:beats (zset: worker id by the time its beat expires,
-- us, server clock), storage:plan (hash: worker id -> MessagePack array of queue numbers).
-- ARGV[6] = operation, then its arguments:
--   'beat' worker, report, ttl (us): keeps the report for ttl; returns the worker's plan
--     (MessagePack) or false.
--   'workers': returns the live workers' reports.
--   'publish' worker, plan, worker, plan, ...: replaces the plan; workers not alive are
--     left out. Returns how many were stored.
--   'read': returns worker, plan, worker, plan, ...
-- Workers whose beat expired leave the registry and the plan first, whatever the op.
--@include base

local WORKERS, BEATS, PLAN = KEYS[NAMED_KEY_COUNT + 1], KEYS[NAMED_KEY_COUNT + 2],
  KEYS[NAMED_KEY_COUNT + 3]
if WORKERS ~= PREFIX .. 'storage:workers' or BEATS ~= PREFIX .. 'storage:beats'
    or PLAN ~= PREFIX .. 'storage:plan' then
  return redis.error_reply('INVALID keys are not the namespace\'s plan keys')
end

local now = clock_now()
local gone = redis.call('ZRANGEBYSCORE', BEATS, '-inf', now)
if #gone > 0 then
  call_chunked('ZREM', BEATS, gone)
  call_chunked('HDEL', WORKERS, gone)
  call_chunked('HDEL', PLAN, gone)
end

local op = ARGV[FIRST_ARG]
if op == 'beat' then
  local worker = ARGV[FIRST_ARG + 1]
  redis.call('ZADD', BEATS, now + tonumber(ARGV[FIRST_ARG + 3]), worker)
  redis.call('HSET', WORKERS, worker, ARGV[FIRST_ARG + 2])
  return redis.call('HGET', PLAN, worker)
elseif op == 'workers' then
  return redis.call('HVALS', WORKERS)
elseif op == 'publish' then
  redis.call('DEL', PLAN)
  local stored = 0
  for i = FIRST_ARG + 1, #ARGV, 2 do
    if redis.call('ZSCORE', BEATS, ARGV[i]) then
      redis.call('HSET', PLAN, ARGV[i], ARGV[i + 1])
      stored = stored + 1
    end
  end
  return stored
elseif op == 'read' then
  return redis.call('HGETALL', PLAN)
end
return redis.error_reply('INVALID op unknown operation ' .. tostring(op))
