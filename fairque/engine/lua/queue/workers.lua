-- queue/workers: the registry of live workers (include/workers.lua). A worker beats with
-- its record and a time to live (here, or with its upkeep: queue/upkeep.lua), and leaves
-- when it stops; one that dies leaves when its registration expires. Expired workers are
-- dropped first, whatever the operation.
-- KEYS: workers workers:expiry workers:functions
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the operation: beat, leave or list
-- ARGV[3..] its arguments:
--   'beat' worker, record (MessagePack map with `functions`, the names it serves), ttl (us)
--   'leave' worker
--   'list': returns {server time, record, its expiry (us), record, expiry, ...} of the
--   live workers
--@include workers

local now = clock_now()
drop_expired_workers(now, 1000)
local op = ARGV[2]
if op == 'list' then
  local reply = {now}
  local entries = redis.call('HGETALL', K.workers)
  for i = 1, #entries, 2 do
    local n = #reply
    reply[n + 1] = entries[i + 1]
    reply[n + 2] = redis.call('ZSCORE', K['workers:expiry'], entries[i]) or '0'
  end
  return reply
end
local worker = ARGV[3]
if op == 'leave' then
  if redis.call('ZSCORE', K['workers:expiry'], worker) then
    redis.call('ZADD', K['workers:expiry'], 0, worker)
  end
  return drop_expired_workers(now, 1000)
elseif op == 'beat' then
  local done = beat(worker, ARGV[4], tonumber(ARGV[5]), now, true)
  if type(done) == 'table' then return done end
  return now
end
return redis.error_reply('INVALID op unknown operation ' .. tostring(op))
