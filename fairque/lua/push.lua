-- push: store tasks and make each ready or scheduled; all of them or none.
-- ARGV[6] = number of tasks, then per task: id, tenant, priority, name, payload,
-- max_retries (-1 = unlimited), timeout (s), keep_result (0/1), and when to start:
-- '' (now), absolute microseconds, or '+' relative microseconds (server time).
-- Returns the number of tasks stored.
--@include ending

local FIELDS = 9
local n = tonumber(ARGV[FIRST_ARG])
local function field(i, offset) return ARGV[FIRST_ARG + 1 + (i - 1) * FIELDS + offset] end

-- Refuse the whole batch before writing anything.
local keys, seen = {}, {}
for i = 1, n do
  local id, priority = field(i, 0), tonumber(field(i, 2))
  if seen[id] then return redis.error_reply('DUPLICATE ' .. id) end
  if priority == nil or priority < 1 or priority > CRITICAL or priority % 1 ~= 0 then
    return redis.error_reply('INVALID priority ' .. field(i, 2))
  end
  seen[id] = true
  keys[i] = task_key(id)
end
for first = 1, n, CHUNK do
  local last = math.min(first + CHUNK - 1, n)
  if redis.call('EXISTS', unpack(keys, first, last)) > 0 then
    for i = first, last do
      if redis.call('EXISTS', keys[i]) == 1 then return redis.error_reply('DUPLICATE ' .. field(i, 0)) end
    end
  end
end

local now = clock_now()
for i = 1, n do
  local id, tenant, priority = field(i, 0), field(i, 1), tonumber(field(i, 2))
  local hash = {'tenant', tenant, 'priority', priority, 'payload', field(i, 4),
    'max_retries', field(i, 5), 'timeout', field(i, 6), 'created_at', now}
  if field(i, 3) ~= '' then hash[#hash + 1] = 'name'; hash[#hash + 1] = field(i, 3) end
  if field(i, 7) == '1' then hash[#hash + 1] = 'keep_result'; hash[#hash + 1] = '1' end
  local start, execute_after = field(i, 8), nil
  if string.sub(start, 1, 1) == '+' then
    execute_after = now + tonumber(string.sub(start, 2))
  elseif start ~= '' then
    execute_after = tonumber(start)
  end
  if execute_after ~= nil and execute_after > now then
    for _, v in ipairs({'state', 'scheduled', 'execute_after', execute_after}) do hash[#hash + 1] = v end
    append('ZADD', K.scheduled, execute_after, id)
  else
    -- A task due in the past has been ready since then; that counts as waiting time.
    local start_time = execute_after or next_tick(now)
    for _, v in ipairs({'state', 'queued', 'start_time', start_time}) do hash[#hash + 1] = v end
    queue_ready(id, tenant, priority, start_time)
  end
  redis.call('HSET', keys[i], unpack(hash))
  count('pushed', tenant)
end
return flush(now, n)
