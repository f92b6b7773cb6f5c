-- Seed 002's lock on one schedule, the key scheduler:lock:<id>: SET NX PX with the
-- instance's owner token. The helpers take the lock's key: a script acting on one
-- schedule declares it (K['scheduler:lock']), one acting on many gets the locks as its
-- variadic keys, or makes them from the ids it finds (lock_key).
--@include base
--@include schedule

-- The key of a schedule's lock, under the namespace's hash tag like every key.
local function lock_key(id) return PREFIX .. 'scheduler:lock:' .. id end

-- Seed 002's lock release: delete the lock only if `token` still owns it (a lock that
-- expired and was taken by another instance is not ours to delete).
local function release_lock(lock, token)
  if redis.call('GET', lock) == token then
    redis.call('DEL', lock)
    return 1
  end
  return 0
end

-- The checks every change of a run makes under the lock: the lock is not held by
-- another instance (ours may have expired: the other checks still hold), and the
-- schedule is still the version, and still due at the time, that the caller planned
-- for. Returns the status, or nil (the caller's plan is stale).
local function planned_status(lock, id, token, version, expected_next)
  local holder = redis.call('GET', lock)
  if holder and holder ~= token then return nil end
  local status = read_status(id)
  local next_run = redis.call('ZSCORE', K['schedules:next'], id)
  if not status or status.v ~= tonumber(version) or tonumber(next_run) ~= tonumber(expected_next) then
    return nil
  end
  return status
end
