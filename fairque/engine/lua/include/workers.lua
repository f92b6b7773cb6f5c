-- The registry of live workers (design section 2): K.workers (worker id -> its record,
-- MessagePack: host, pid, functions, concurrency, in flight, started), K['workers:expiry']
-- (worker id by the time its registration expires, us) and K['workers:functions'] (task
-- function name -> how many live workers serve it), so a task whose function a worker
-- lacks can tell whether any live worker could run it.
--@include base

-- Drops the workers whose registration expired (at most `limit`): a worker that died
-- leaves by itself.
local function drop_expired_workers(now, limit)
  local gone = redis.call('ZRANGEBYSCORE', K['workers:expiry'], '-inf', now, 'LIMIT', 0, limit)
  for _, worker in ipairs(gone) do
    local record = redis.call('HGET', K.workers, worker)
    if record then
      for _, name in ipairs(cmsgpack.unpack(record).functions or {}) do
        if redis.call('HINCRBY', K['workers:functions'], name, -1) <= 0 then
          redis.call('HDEL', K['workers:functions'], name)
        end
      end
    end
    redis.call('HDEL', K.workers, worker)
  end
  if #gone > 0 then call_chunked('ZREM', K['workers:expiry'], gone) end
  return #gone
end

-- Keeps `worker` registered until `now` + `ttl` (us). Its record (MessagePack, with
-- `functions`, the names it serves) is written when the worker was not registered or
-- with `rewrite`; else only its expiry moves, so a worker whose record did not change
-- (an idle one) keeps it at the cost of one ZADD. The record keeps `ttl`, from which
-- the registry's list tells when the worker was last seen (its expiry - ttl). Returns
-- whether the worker was registered before, or an error reply for a bad record.
local function beat(worker, packed, ttl, now, rewrite)
  -- Only a registered worker's expiry moves (XX); CH counts it, so 0: not registered.
  local expiry = K['workers:expiry']
  if not rewrite and redis.call('ZADD', expiry, 'XX', 'CH', now + ttl, worker) == 1 then
    return true
  end
  local known = redis.call('ZSCORE', K['workers:expiry'], worker) ~= false
  local record = cmsgpack.unpack(packed)
  if type(record) ~= 'table' or type(record.functions) ~= 'table' then
    return redis.error_reply('INVALID record of worker ' .. worker)
  end
  if not known then -- its functions count from its first beat until it leaves
    for _, name in ipairs(record.functions) do
      redis.call('HINCRBY', K['workers:functions'], name, 1)
    end
  end
  redis.call('ZADD', K['workers:expiry'], now + ttl, worker)
  record.seen_at, record.ttl = now, ttl
  redis.call('HSET', K.workers, worker, cmsgpack.pack(record))
  return known
end

-- True when a live worker serves task function `name`.
local function served(name)
  return tonumber(redis.call('HGET', K['workers:functions'], name) or 0) > 0
end
