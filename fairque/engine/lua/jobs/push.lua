-- jobs/push: enqueue strict-policy jobs (seed 003); all of them or none.
-- KEYS: stats clock strict:partitions constraints settings stats:tenants
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the number of jobs n
-- ARGV[3] MessagePack array of n rows (id, name, priority (int32), max_retries,
--   timeout (s), keep_result (0/1)) one after the other
-- ARGV[4..] the n arguments (MessagePack, decoded here only to match constraints)
-- Returns the number of jobs stored.
--@include rows
--@include settings
--@include strict
--@include figures

local WIDTH = 6
local rows, jobs = read_rows(ARGV[2], WIDTH, ARGV[3], true), tonumber(ARGV[2])
if rows == nil then return redis.error_reply('INVALID jobs do not match their count') end
local INT32 = 2147483648
local keys = {}
for i, row in each_row(rows, WIDTH) do
  local id, name, priority = row[1], row[2], row[3]
  if type(id) ~= 'string' or id == '' or type(name) ~= 'string' or name == '' then
    return redis.error_reply('INVALID id or name of job ' .. i)
  end
  if type(priority) ~= 'number' or priority % 1 ~= 0 or priority < -INT32 or priority >= INT32 then
    return redis.error_reply('INVALID priority ' .. tostring(priority))
  end
  -- In a batch, the error names the job as the master's API does: [1].argument.
  local field = jobs > 1 and ('[' .. (i - 1) .. '].argument') or 'argument'
  local refused = too_big(field, ARGV[3 + i])
  if refused then return refused end
  keys[i] = task_key(id)
end
-- One EXISTS per CHUNK ids; the duplicate is looked for only where there is one.
for first = 1, #keys, CHUNK do
  local last = math.min(first + CHUNK - 1, #keys)
  if redis.call('EXISTS', unpack(keys, first, last)) > 0 then
    for i = first, last do
      if redis.call('EXISTS', keys[i]) == 1 then return redis.error_reply('DUPLICATE ' .. rows[(i - 1) * WIDTH + 1]) end
    end
  end
end

local now = clock_now()
local constraints, version = current_constraints()
local partitions = {}
for i, row in each_row(rows, WIDTH) do
  local id, name, priority = row[1], row[2], row[3]
  local argument = ARGV[3 + i]
  local seq = next_tick(now)
  local partition = partition_of(name, argument, constraints)
  redis.call('HSET', keys[i], 'kind', 'job', 'name', name, 'priority', priority,
    'payload', argument, 'max_retries', row[4], 'timeout', row[5], 'keep_result', row[6],
    'created_at', now,
    'state', 'queued', 'seq', seq, 'start_time', seq,
    'partition', partition, 'constraints_version', version)
  -- What queue_strict does, from what is at hand: one ZADD per partition at the flush.
  append('ZADD', strict_key(partition), priority, strict_member(seq, id))
  if not partitions[partition] then
    partitions[partition] = true
    redis.call('SADD', K['strict:partitions'], partition)
  end
  count('pushed')
end
return flush_counts(now, jobs)
