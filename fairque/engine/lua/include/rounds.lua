-- A namespace's maintenance round (namespace/reap.lua): return expired leases, promote
-- due scheduled tasks, drop the ids of expired ended tasks from the state registries and
-- the workers whose registration expired, and cancel deferred tasks whose dependency no
-- longer exists (it failed and its record expired, so they could never run), each
-- bounded by `limit` per round.
--
-- A round runs when the last one is `interval` old (or at once, with interval 0), so
-- whatever number of processes ask, the namespace is tidied about once per interval, one
-- round at a time (a script runs alone). A round that hit its bound makes the next one
-- due at once. The `maintenance` hash keeps when rounds ran and what they did, for stats
-- and metrics.
--@include maintenance
--@include cancel
--@include workers

local NO_ROUND = {0, 0, 0, 0, 0, 0}

-- Runs a round at `now` if one is due; returns {1 if a round ran, leases expired,
-- promoted, registry entries dropped, orphaned tasks canceled, 1 if work is left for the
-- next round}. The caller flushes. With `heads_clear`, the caller's maintain() found no
-- lease expired and nothing to promote at `now`: those reads are not made again.
local function maintenance_round(now, limit, interval, heads_clear)
  if interval > 0 and now < tonumber(redis.call('HGET', K.maintenance, 'next_at') or 0) then
    return NO_ROUND
  end
  local expired, promoted = 0, 0
  if not heads_clear then
    expired = reap_expired(now, limit)
    promoted = promote_due(now, limit)
  end
  local more = expired == limit or promoted == limit

  -- Registries are sorted by expiry: drop what has expired, at most `limit` ids of each.
  -- Their heads first: in a quiet namespace none has expired, and one read each is all.
  local dropped = 0
  for _, state in ipairs({'finished', 'failed', 'canceled'}) do
    local registry = ended_registry(state)
    local head = redis.call('ZRANGE', registry, 0, 0, 'WITHSCORES')
    if head[1] and tonumber(head[2]) <= now then
      local last = redis.call('ZRANGE', registry, limit - 1, limit - 1, 'WITHSCORES')
      if last[1] and tonumber(last[2]) <= now then
        dropped = dropped + redis.call('ZREMRANGEBYRANK', registry, 0, limit - 1)
        more = true
      else
        dropped = dropped + redis.call('ZREMRANGEBYSCORE', registry, '-inf', now)
      end
    end
  end

  drop_expired_workers(now, limit)

  local orphaned = 0
  local cursor = redis.call('GET', K['deps:cursor']) or '0'
  local scan = redis.call('SSCAN', K['state:deferred'], cursor, 'COUNT', limit)
  if scan[1] ~= cursor then redis.call('SET', K['deps:cursor'], scan[1]) end
  for _, id in ipairs(scan[2]) do
    for _, blocker in ipairs(redis.call('SMEMBERS', blocked_key(id))) do
      if redis.call('EXISTS', task_key(blocker)) == 0 then
        cancel_with_dependents(id, 'dependency ' .. blocker .. ' no longer exists', now)
        orphaned = orphaned + 1
        break
      end
    end
  end

  redis.call('HSET', K.maintenance, 'next_at', more and now or now + interval, 'last_at', now,
    'last_expired', expired, 'last_promoted', promoted, 'last_dropped', dropped,
    'last_orphaned', orphaned)
  redis.call('HINCRBY', K.maintenance, 'rounds', 1)
  if dropped > 0 then redis.call('HINCRBY', K.maintenance, 'dropped', dropped) end
  return {1, expired, promoted, dropped, orphaned, more and 1 or 0}
end
