-- Ready work: per-tenant queues, the per-tenant ready count and the global ring.
-- Invariant: a tenant is in the ring exactly when its ready count is above zero.
--@include base

-- Queues task `id` of `tenant` as ready since `start_time` (the caller sets its hash).
local function make_ready(now, id, tenant, priority, start_time)
  if priority == CRITICAL then
    redis.call('RPUSH', critical_key(tenant), id)
  else
    redis.call('ZADD', normal_key(tenant, priority), start_time, id)
  end
  if redis.call('HINCRBY', K.ready, tenant, 1) == 1 then
    -- A tenant that comes back joins at the back of the ring.
    redis.call('ZADD', K.ring, 'NX', next_tick(now), tenant)
  end
end

-- One ready task of `tenant` left its queues; returns how many remain.
local function release_ready(tenant)
  local left = redis.call('HINCRBY', K.ready, tenant, -1)
  if left <= 0 then
    redis.call('HDEL', K.ready, tenant)
    redis.call('ZREM', K.ring, tenant)
  end
  return left
end

-- The least recently served tenant among `candidates` that has ready work, or nil.
local function least_recent(candidates)
  if #candidates == 0 then return nil end
  local scores = redis.call('ZMSCORE', K.ring, unpack(candidates))
  local best, best_score = nil, nil
  for i, score in ipairs(scores) do
    if score then
      score = tonumber(score)
      if best_score == nil or score < best_score then best, best_score = candidates[i], score end
    end
  end
  return best
end

-- The tenant to serve next: assigned tenants first, then steal targets (work stealing);
-- with neither, the head of the global ring.
local function next_tenant(assigned, steal)
  if assigned == nil then
    local head = redis.call('ZRANGE', K.ring, 0, 0)
    return head[1]
  end
  return least_recent(assigned) or least_recent(steal)
end

-- Removes and returns the next task id of `tenant`: the critical head (FIFO), else the
-- normal head with the highest urgency (p / 5) * (now - ready time); ties go to the
-- higher priority, then to the older task. Compares at most five heads.
local function take_task(tenant, now)
  local id = redis.call('LPOP', critical_key(tenant))
  if id then return id end
  local best_id, best_priority, best_urgency = nil, nil, nil
  for priority = 5, 1, -1 do
    local head = redis.call('ZRANGE', normal_key(tenant, priority), 0, 0, 'WITHSCORES')
    if head[1] then
      local waited = now - tonumber(head[2])
      if waited < 0 then waited = 0 end
      local urgency = priority / 5 * waited
      if best_urgency == nil or urgency > best_urgency then
        best_id, best_priority, best_urgency = head[1], priority, urgency
      end
    end
  end
  if best_id then redis.call('ZREM', normal_key(tenant, best_priority), best_id) end
  return best_id
end

-- Takes one task of `tenant` and moves the tenant to the back of the ring.
local function serve_tenant(tenant, now)
  local id = take_task(tenant, now)
  if id == nil then
    -- Ready count without queued ids: repair the invariant rather than loop on it.
    redis.call('HDEL', K.ready, tenant)
    redis.call('ZREM', K.ring, tenant)
    return nil
  end
  if release_ready(tenant) > 0 then redis.call('ZADD', K.ring, 'XX', next_tick(now), tenant) end
  return id
end

-- Removes a queued task from its tenant queue (cancel); returns true if it was there.
local function unqueue(id, tenant, priority)
  local removed
  if priority == CRITICAL then
    removed = redis.call('LREM', critical_key(tenant), 1, id)
  else
    removed = redis.call('ZREM', normal_key(tenant, priority), id)
  end
  if removed == 1 then release_ready(tenant) end
  return removed == 1
end
