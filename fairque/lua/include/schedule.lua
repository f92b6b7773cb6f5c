-- The scheduler's records (design section 8). The loader names its keys K.schedules
-- (id -> definition), K['schedules:next'] (active ids by next run, us),
-- K['schedules:status'] (id -> MessagePack map: v (version), state, runs, skipped,
-- failures, last_run, last_submitted_at, last_task_id, last_error, pending_run) and
-- K['scheduler:instances']; a script acting on one schedule also gets its K.lock.
--@include base

local function read_status(id)
  local packed = redis.call('HGET', K['schedules:status'], id)
  if not packed then return nil end
  return cmsgpack.unpack(packed)
end

local function write_status(id, status)
  redis.call('HSET', K['schedules:status'], id, cmsgpack.pack(status))
end

-- Seed 002's lock release: delete the lock only if `token` still owns it (a lock that
-- expired and was taken by another instance is not ours to delete).
local function release_lock(token)
  if redis.call('GET', K.lock) == token then
    redis.call('DEL', K.lock)
    return 1
  end
  return 0
end

-- The checks every change of a run makes under the lock: the lock is not held by
-- another instance (ours may have expired: the other checks still hold), and the schedule is still the version, and still due at the time,
-- that the caller planned for. Returns the status, or nil (the caller's plan is stale).
local function planned_status(id, token, version, expected_next)
  local holder = redis.call('GET', K.lock)
  if holder and holder ~= token then return nil end
  local status = read_status(id)
  local next_run = redis.call('ZSCORE', K['schedules:next'], id)
  if not status or status.v ~= tonumber(version) or tonumber(next_run) ~= tonumber(expected_next) then
    return nil
  end
  return status
end

-- Stores an instance's self-description (MessagePack map) stamped with the server time.
local function record_instance(instance, packed, now)
  local record = cmsgpack.unpack(packed)
  record.seen_at = now
  redis.call('HSET', K['scheduler:instances'], instance, cmsgpack.pack(record))
end
