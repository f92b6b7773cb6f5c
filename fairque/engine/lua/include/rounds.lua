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
--
-- The round in an idle worker's call (its wait's upkeep) is light while the last full
-- round is less than ten of the worker's waits old: it drops the workers whose registration expired and
-- moves the round's times, and reads nothing else. While a namespace's workers all wait,
-- nothing else is due: an expired lease and a scheduled task that comes due are the pops'
-- housekeeping (a wait ends when one comes due), and what only a full round does (the
-- ids of expired ended tasks dropped from their registries, orphaned deferred tasks
-- canceled) can wait minutes. A quiet full round reads five keys more (~20k instructions
-- of an idle wait's ~150k, 30 s by default).
--@include maintenance
--@include cancel
--@include workers

local NO_ROUND = {0, 0, 0, 0, 0, 0}

-- Runs a round at `now` if one is due; returns {1 if a round ran, leases expired,
-- promoted, registry entries dropped, orphaned tasks canceled, 1 if work is left for the
-- next round}. The caller flushes. `limit` nil: 10 x maintenance_batch (read only when a
-- round runs). With `heads_clear`, the caller's maintain() found no lease expired and
-- nothing to promote at `now`: those reads are not made again. With `idle_gap` (us), the
-- caller is an idle worker's upkeep: the round is light unless the last full one is
-- `idle_gap` old (see above).
local function maintenance_round(now, limit, interval, heads_clear, idle_gap)
  local times = redis.call('HMGET', K.maintenance, 'next_at', 'last_at', 'full_at', 'rounds')
  local next_at = tonumber(times[1]) or 0
  if interval > 0 and now < next_at then return NO_ROUND end
  limit = limit or 10 * setting('maintenance_batch')
  -- Full after a round that hit its bound (its next was due at once), or `idle_gap` on.
  local full = not idle_gap or next_at == tonumber(times[2])
    or now >= (tonumber(times[3]) or 0) + idle_gap
  local expired, promoted, dropped, orphaned, more = 0, 0, 0, 0, false
  if full then
    if not heads_clear then
      expired = reap_expired(now, limit)
      promoted = promote_due(now, limit)
    end
    more = expired == limit or promoted == limit

    -- Registries are sorted by expiry: drop what has expired, at most `limit` ids of
    -- each. Their heads first: in a quiet namespace none has expired, and one read each
    -- is all.
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
  end

  drop_expired_workers(now, limit)

  -- The count of rounds in the same write (read above): one command fewer than HINCRBY.
  local done = {'next_at', more and now or now + interval, 'last_at', now,
    'last_expired', expired, 'last_promoted', promoted, 'last_dropped', dropped,
    'last_orphaned', orphaned, 'rounds', (tonumber(times[4]) or 0) + 1}
  if full then
    done[#done + 1], done[#done + 2] = 'full_at', now
  end
  redis.call('HSET', K.maintenance, unpack(done))
  if dropped > 0 then redis.call('HINCRBY', K.maintenance, 'dropped', dropped) end
  return {1, expired, promoted, dropped, orphaned, more and 1 or 0}
end
