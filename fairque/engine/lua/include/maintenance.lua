-- Expired leases and due scheduled tasks, bounded per call so no call scans everything.
--@include expiry

-- What the checks of a pop's maintenance (maintain) found: whether anything was due, and
-- else the earliest time something will be (within QUIET_HORIZON); `heads_read` is set
-- once it has read every head (false: it read none, or found one due), and
-- `earliest_head` is the earliest of them (nil: all three sets are empty).
local found_due, next_due = false, nil
local heads_read, earliest_head = false, nil

-- How many members of zset `key` a call takes at most: `limit`, or, when nil, the
-- namespace's maintenance batch if a member is due by `now` and nil if none is. So a pop
-- that finds nothing due reads no settings (their read cost an empty pop ~11k instructions).
local function due_limit(key, now, limit)
  if limit ~= nil then return limit end
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first[2] == nil then return nil end
  local due = tonumber(first[2])
  if due <= now then
    found_due = true
    return setting('maintenance_batch')
  end
  if next_due == nil or due < next_due then next_due = due end
  if earliest_head == nil or due < earliest_head then earliest_head = due end
  return nil
end

-- Makes scheduled tasks whose time has come ready, as of their execute_after, and lets
-- tenants whose rate window opened back into the ring.
local function promote_due(now, limit)
  local sleepers = due_limit(K.sleeping, now, limit)
  if sleepers ~= nil then wake_sleepers(now, sleepers) end
  limit = due_limit(K.scheduled, now, limit)
  if limit == nil then return 0 end
  local due = redis.call('ZRANGEBYSCORE', K.scheduled, '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit)
  if #due == 0 then return 0 end
  local ids = {}
  for i = 1, #due, 2 do
    local id, ready_at = due[i], tonumber(due[i + 1])
    ids[#ids + 1] = id
    local key = task_key(id)
    local f = redis.call('HMGET', key, 'kind', 'tenant', 'priority', 'name')
    redis.call('HSET', key, 'state', 'queued', 'start_time', ready_at)
    queue_ready(id, f[1], f[2], f[4] or '', tonumber(f[3]), ready_at)
  end
  redis.call('ZREM', K.scheduled, unpack(ids))
  return #ids
end

-- The housekeeping that rides along with every pop, so a lone worker needs no separate
-- reaper: skipped while K['maintenance:quiet'] lives (writes.lua), which a round that
-- found nothing due sets again. The key expires a millisecond before the earliest head
-- (its expiry has milliseconds; being early only costs a check). `now` may be nil, for
-- a caller that has not read the clock yet: it is read only if the checks run. With
-- `quiet_mark` false no mark is set (an idle worker's pop, whose next call comes a wait
-- later, long after the mark's second: a command for nothing). Returns `now`, or the
-- time read.
local function maintain(now, quiet_mark)
  if redis.call('EXISTS', K['maintenance:quiet']) == 1 then return now end
  now = now or clock_now()
  found_due, next_due = false, now + QUIET_HORIZON
  local expiring = due_limit(K.leases, now)
  if expiring ~= nil then reap_expired(now, expiring) end
  promote_due(now)
  if found_due then return now end
  heads_read = true
  local expires = math.floor(next_due / 1000) - 1
  if quiet_mark ~= false and expires * 1000 > now then
    mark_quiet(expires)
  end
  return now
end

-- After maintain(): nothing was due at its `now` in K.leases, K.scheduled and K.sleeping
-- (it read their heads and found none due: a round at the same `now` has none of that
-- work), and the earliest of their heads (nil: none holds anything), as earliest_due
-- would read them again; false if it did not read them all (the quiet mark, or work due).
local function maintained_heads()
  if not heads_read then return false, nil end
  return true, earliest_head
end
