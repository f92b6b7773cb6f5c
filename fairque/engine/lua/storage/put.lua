-- storage/put: store tasks in numbered queues (seed 004 PutTask); all of them or none.
-- KEYS: stats clock storage:ids storage:queues stats:tenants storage:queue:<n>...
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the number of tasks n
-- ARGV[3] MessagePack array of n rows (key slot (1 = the first queue key), queue number,
--   start) one after the other; start is '' (now), absolute microseconds, or '+' relative microseconds
-- ARGV[4..] the n payloads (opaque bytes)
-- Returns the new task ids, in order.
--@include storage
--@include rows
--@include figures

local WIDTH = 3
local rows = read_rows(ARGV[2], WIDTH, ARGV[3], true)
if rows == nil then return redis.error_reply('INVALID requests do not match their count') end
local keys = {}
for i, row in each_row(rows, WIDTH) do
  keys[i] = declared_queue_key(row[1], row[2])
  if keys[i] == nil or type(row[3]) ~= 'string' then
    return redis.error_reply('INVALID queue_num of request ' .. i)
  end
end

local now = clock_now()
local ids, held = {}, {}
for i, row in each_row(rows, WIDTH) do
  local id
  -- Ids are shared with fair-queue tasks, whose ids users may choose: skip taken ones.
  repeat id = int(redis.call('INCR', K['storage:ids'])) until redis.call('EXISTS', task_key(id)) == 0
  local queue = int(row[2])
  local start_time = parse_start(row[3], now) or next_tick(now)
  redis.call('HSET', task_key(id), 'kind', 'storage', 'queue', queue,
    'payload', ARGV[3 + i], 'state', 'queued', 'max_retries', -1, 'created_at', now,
    'start_time', start_time)
  append('ZADD', keys[i], start_time, id)
  held[queue] = (held[queue] or 0) + 1
  count('pushed')
  ids[i] = tonumber(id)
end
for queue, n in pairs(held) do count_held(queue, n) end
return flush_counts(now, ids)
