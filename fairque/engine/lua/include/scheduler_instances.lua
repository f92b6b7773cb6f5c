-- The scheduler instances' records (design section 8): K['scheduler:instances'] (instance
-- id -> MessagePack record) and K['scheduler:instances:expiry'] (instance ids, score =
-- when the record expires, us).

-- Stores an instance's self-description (MessagePack map) stamped with the server time;
-- it expires `ttl` us later unless the instance records itself again (its heartbeat).
local function record_instance(instance, packed, now, ttl)
  local record = cmsgpack.unpack(packed)
  record.seen_at = now
  redis.call('HSET', K['scheduler:instances'], instance, cmsgpack.pack(record))
  redis.call('ZADD', K['scheduler:instances:expiry'], now + ttl, instance)
end

-- Drops expired instance records (a killed instance never says it stopped), at most
-- 100 per call, so that records of dead instances do not pile up.
local function drop_expired_instances(now)
  local dead = redis.call('ZRANGEBYSCORE', K['scheduler:instances:expiry'], '-inf', now,
    'LIMIT', 0, 100)
  if #dead > 0 then
    redis.call('HDEL', K['scheduler:instances'], unpack(dead))
    redis.call('ZREM', K['scheduler:instances:expiry'], unpack(dead))
  end
end
