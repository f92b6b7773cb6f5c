-- The strict policy (seed 003, design section 5): the ready job with the smallest int32
-- priority, ties to the earliest enqueued.
--
-- Ready jobs are partitioned by their name and the set of constraints they match:
-- partition `<constraint ids, comma separated>|<name>` is the zset strict:<partition>,
-- score = priority, member = the job's 16-digit enqueue tick followed by its id (equal
-- scores sort by member, so ties go to the earliest). `strict:partitions` lists the
-- partitions that may hold jobs; a pop compares their heads, so jobs held back by an
-- exhausted constraint are never scanned and never block other partitions.
--
-- A job's partition holds for the constraints as they were when it was computed: the
-- `constraints` hash counts its changes in the field VERSION, and a job records the
-- count its partition was computed at (`constraints_version`). Ready and running jobs
-- follow a change at once (jobs/constraint_set); a job in any other state (scheduled for
-- a retry, failed, deferred) gets its partition again when it is queued (queue_strict).
--@include base

-- Not a constraint id (those are [A-Za-z0-9_.-]), so never mistaken for one.
local VERSION = ':version'

local function strict_key(partition) return PREFIX .. 'strict:' .. partition end
local function strict_member(seq, id) return string.format('%016d', seq) .. id end
local function running_key(cid) return PREFIX .. 'constraint:running:' .. cid end
local function starts_key(cid) return PREFIX .. 'constraint:starts:' .. cid end

-- The constraint ids and the job name of a partition.
local function split_partition(partition)
  local bar = string.find(partition, '|', 1, true)
  local sig, name = string.sub(partition, 1, bar - 1), string.sub(partition, bar + 1)
  local cids = {}
  for cid in string.gmatch(sig, '[^,]+') do cids[#cids + 1] = cid end
  return cids, name
end

-- Removes a queued strict job from its partition; returns true if it was there.
local function unqueue_strict(id)
  local f = redis.call('HMGET', task_key(id), 'partition', 'seq')
  return redis.call('ZREM', strict_key(f[1]), strict_member(tonumber(f[2]), id)) == 1
end

-- A constraint as stored in the `constraints` hash: MessagePack
-- {matchers = {{field, op, value}...}, concurrency (0: none), rate (0: none), period (s)}.
local function read_constraint(blob)
  local c = cmsgpack.unpack(blob)
  return {matchers = c[1], concurrency = c[2], rate = c[3], period = c[4]}
end

-- The value at `field` ('name', 'argument' or 'argument.a.b') of a job; nil if absent.
local function field_value(field, name, argument)
  if field == 'name' then return name end
  local value = argument
  for part in string.gmatch(string.sub(field, 10), '[^.]+') do
    if type(value) ~= 'table' then return nil end
    value = value[part]
  end
  return value
end

local function matches(matcher, name, argument)
  local value = field_value(matcher[1], name, argument)
  local op, wanted = matcher[2], matcher[3]
  if value == nil or type(value) == 'table' then return false end
  if op == 'equals' then return value == wanted end
  if op == 'prefix' then
    return type(value) == 'string' and string.sub(value, 1, #wanted) == wanted
  end
  for _, candidate in ipairs(wanted) do -- 'in'
    if value == candidate then return true end
  end
  return false
end

-- The constraints now, read once per call: a flat list {id, definition, ...}, and the
-- count of changes (VERSION). A script that changes the hash does so before reading it.
local constraints_read, constraints_read_version = nil, nil
local function current_constraints()
  if constraints_read == nil then
    local all = redis.call('HGETALL', K.constraints)
    constraints_read, constraints_read_version = {}, '0'
    for i = 1, #all, 2 do
      if all[i] == VERSION then
        constraints_read_version = all[i + 1]
      else
        constraints_read[#constraints_read + 1] = all[i]
        constraints_read[#constraints_read + 1] = all[i + 1]
      end
    end
  end
  return constraints_read, constraints_read_version
end

-- The partition of a job: the constraints all of whose matchers it satisfies.
-- `constraints` is a flat list {id, definition, ...} (current_constraints).
local function partition_of(name, payload, constraints)
  local argument = nil
  local cids = {}
  for i = 1, #constraints, 2 do
    if argument == nil then
      local ok, decoded = pcall(cmsgpack.unpack, payload)
      argument = ok and decoded or false
    end
    local all = true
    for _, matcher in ipairs(read_constraint(constraints[i + 1]).matchers) do
      if not matches(matcher, name, argument) then all = false; break end
    end
    if all then cids[#cids + 1] = constraints[i] end
  end
  table.sort(cids)
  return table.concat(cids, ',') .. '|' .. name
end

-- Queues strict job `id` in its partition (its hash holds partition, priority and seq),
-- computing the partition again if the constraints changed since it was computed.
local function queue_strict(id)
  local key = task_key(id)
  local f = redis.call('HMGET', key, 'partition', 'priority', 'seq', 'constraints_version', 'name')
  local partition = f[1]
  local constraints, version = current_constraints()
  if (f[4] or '0') ~= version then
    partition = partition_of(f[5], redis.call('HGET', key, 'payload'), constraints)
    redis.call('HSET', key, 'partition', partition, 'constraints_version', version)
  end
  redis.call('ZADD', strict_key(partition), tonumber(f[2]), strict_member(tonumber(f[3]), id))
  redis.call('SADD', K['strict:partitions'], partition)
end

-- How many more jobs constraint `cid` lets start now; a deleted constraint limits nothing.
local function constraint_room(cid, now)
  local blob = redis.call('HGET', K.constraints, cid)
  if not blob then return math.huge end
  local c = read_constraint(blob)
  local room = math.huge
  if c.concurrency > 0 then
    redis.call('ZREMRANGEBYSCORE', running_key(cid), '-inf', now)
    room = c.concurrency - redis.call('ZCARD', running_key(cid))
  end
  if c.rate > 0 then
    redis.call('ZREMRANGEBYSCORE', starts_key(cid), '-inf', now - c.period * MICROS)
    room = math.min(room, c.rate - redis.call('ZCARD', starts_key(cid)))
  end
  return room
end
