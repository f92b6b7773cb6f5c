-- queue/workers: the registry of live workers. A worker beats every few seconds with its
-- record and a time to live, and leaves when it stops; one that dies leaves when its
-- registration expires. Expired workers are dropped first, whatever the operation.
-- KEYS: workers workers:expiry workers:functions
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the operation: beat, leave or list
-- ARGV[3..] its arguments:
--   'beat' worker, record (MessagePack map with `functions`, the names it serves), ttl (us)
--   'leave' worker
--   'list': returns {server time, record, record, ...} of the live workers
--@include workers

local now = clock_now()
drop_expired_workers(now, 1000)
local op = ARGV[2]
if op == 'list' then
  local reply = {now}
  for _, record in ipairs(redis.call('HVALS', K.workers)) do reply[#reply + 1] = record end
  return reply
end
local worker = ARGV[3]
local known = redis.call('ZSCORE', K['workers:expiry'], worker)
if op == 'leave' then
  if known then redis.call('ZADD', K['workers:expiry'], 0, worker) end
  return drop_expired_workers(now, 1000)
elseif op == 'beat' then
  local record = cmsgpack.unpack(ARGV[4])
  if type(record) ~= 'table' or type(record.functions) ~= 'table' then
    return redis.error_reply('INVALID record of worker ' .. worker)
  end
  if not known then -- its functions count from its first beat until it leaves
    for _, name in ipairs(record.functions) do
      redis.call('HINCRBY', K['workers:functions'], name, 1)
    end
  end
  redis.call('ZADD', K['workers:expiry'], now + tonumber(ARGV[5]), worker)
  record.seen_at = now
  redis.call('HSET', K.workers, worker, cmsgpack.pack(record))
  return now
end
return redis.error_reply('INVALID op unknown operation ' .. tostring(op))
