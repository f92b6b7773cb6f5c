-- jobs/pop: lease up to `count` ready strict-policy jobs (seed 003, design section 5).
-- KEYS: scheduled leases stats clock state:finished state:failed state:canceled strict:partitions constraints settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the worker id
-- ARGV[3] count
-- ARGV[4] seconds added to each job's timeout for its lease
-- ARGV[5..] the job names the worker serves (none: every name)
-- Returns, per leased job: id, name, argument, priority, attempts, timeout, max_retries,
-- lease token, lease deadline (us).
--@include maintenance

local worker_id, wanted = ARGV[2], tonumber(ARGV[3])
local grace = tonumber(ARGV[4])
local served = nil
if #ARGV > 4 then
  served = {}
  for i = 5, #ARGV do served[ARGV[i]] = true end
end

local now = clock_now()
maintain(now)
flush_ready(now)

-- The head of every partition this worker may take from: {partition, cids, priority, member}.
local heads = {}
local function read_head(partition)
  local head = redis.call('ZRANGE', strict_key(partition), 0, 0, 'WITHSCORES')
  if head[1] then return head[1], tonumber(head[2]) end
  redis.call('SREM', K['strict:partitions'], partition)
  return nil
end
for _, partition in ipairs(redis.call('SMEMBERS', K['strict:partitions'])) do
  local cids, name = split_partition(partition)
  if served == nil or served[name] then
    local member, priority = read_head(partition)
    if member then heads[#heads + 1] = {partition, cids, priority, member} end
  end
end

-- Room left per constraint, read once per call.
local room = {}
local function has_room(cids)
  for _, cid in ipairs(cids) do
    if room[cid] == nil then room[cid] = constraint_room(cid, now) end
    if room[cid] <= 0 then return false end
  end
  return true
end

local leased = {}
local function lease(id, cids)
  local key = task_key(id)
  local f = redis.call('HMGET', key, 'name', 'payload', 'priority', 'attempts', 'timeout',
    'max_retries')
  local deadline = now + math.floor((tonumber(f[5]) + grace) * MICROS)
  local token = next_tick(now)
  append('ZADD', K.leases, deadline, id)
  note_due(deadline, now)
  redis.call('HSET', key, 'state', 'started', 'leased_at', now, 'lease_deadline', deadline,
    'lease_token', token, 'worker_id', worker_id)
  for _, cid in ipairs(cids) do
    room[cid] = room[cid] - 1
    redis.call('ZADD', running_key(cid), deadline, id)
    redis.call('ZADD', starts_key(cid), now, token)
  end
  local row = #leased
  leased[row + 1], leased[row + 2], leased[row + 3] = id, f[1], f[2]
  leased[row + 4], leased[row + 5], leased[row + 6] = f[3], f[4] or 0, f[5]
  leased[row + 7], leased[row + 8], leased[row + 9] = f[6], token, deadline
  count('started')
end

for _ = 1, wanted do
  local best = nil
  for _, head in ipairs(heads) do
    if head[4] and (best == nil or head[3] < best[3] or (head[3] == best[3] and head[4] < best[4]))
        and has_room(head[2]) then
      best = head
    end
  end
  if best == nil then break end
  redis.call('ZREM', strict_key(best[1]), best[4])
  lease(string.sub(best[4], 17), best[2])
  best[4], best[3] = read_head(best[1])
end
return flush(now, leased)
