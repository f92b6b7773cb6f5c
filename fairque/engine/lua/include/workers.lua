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

-- True when a live worker serves task function `name`.
local function served(name)
  return tonumber(redis.call('HGET', K['workers:functions'], name) or 0) > 0
end
