-- Seed 004's numbered queues: each is a zset of task ids by start time, and the
-- `storage:queues` hash counts the tasks each queue holds (ready, delayed or taken), so
-- taken = held - queued needs no registry of its own. Taken tasks hold a lease in the
-- shared `leases` zset, so expiry.lua's reap_expired returns them when it expires.
--@include writes

-- The queue key the caller declared in KEYS[KEY_COUNT + slot], or nil when it is
-- not the key of queue `n`.
local function declared_queue_key(slot, n)
  local key = KEYS[KEY_COUNT + slot]
  if type(n) ~= 'number' or n < 0 or n % 1 ~= 0 or key ~= storage_queue_key(int(n)) then
    return nil
  end
  return key
end

-- Start times up to this are due: ticks handed out may run a few microseconds ahead of
-- the server clock, and a task put a moment ago must already be ready.
local function due_horizon(now)
  return math.max(now, latest_tick())
end

-- `n` more (or fewer) tasks held by queue `queue`; an empty queue leaves the hash.
local function count_held(queue, n)
  if redis.call('HINCRBY', K['storage:queues'], queue, n) <= 0 then
    redis.call('HDEL', K['storage:queues'], queue)
  end
end
