-- push: store tasks and make each ready or scheduled; all of them or none.
-- ARGV[6] = number of tasks, then per task: id, tenant, priority, name, payload,
-- max_retries (-1 = unlimited), timeout (s), keep_result (0/1), execute_after (us or '').
-- Returns the number of tasks stored.
--@include ready

local FIELDS = 9
local count = tonumber(ARGV[FIRST_ARG])

local function field(i, offset) return ARGV[FIRST_ARG + 1 + (i - 1) * FIELDS + offset] end

-- Refuse the whole batch before writing anything.
local seen = {}
for i = 1, count do
  local id, priority = field(i, 0), tonumber(field(i, 2))
  if seen[id] or redis.call('EXISTS', task_key(id)) == 1 then
    return redis.error_reply('DUPLICATE ' .. id)
  end
  if priority == nil or priority < 1 or priority > CRITICAL or priority % 1 ~= 0 then
    return redis.error_reply('INVALID priority ' .. tostring(field(i, 2)))
  end
  seen[id] = true
end

local now = clock_now()
local created_at = int(now)
local pushed = {}
for i = 1, count do
  local id, tenant, priority = field(i, 0), field(i, 1), tonumber(field(i, 2))
  local execute_after = tonumber(field(i, 8))
  local key = task_key(id)
  redis.call('HSET', key, 'tenant', tenant, 'priority', priority, 'payload', field(i, 4),
    'max_retries', field(i, 5), 'timeout', field(i, 6), 'keep_result', field(i, 7),
    'created_at', created_at, 'attempts', 0)
  local name = field(i, 3)
  if name ~= '' then redis.call('HSET', key, 'name', name) end
  if execute_after ~= nil and execute_after > now then
    redis.call('HSET', key, 'state', 'scheduled', 'execute_after', int(execute_after))
    redis.call('ZADD', K.scheduled, execute_after, id)
  else
    -- A task due in the past has been ready since then; that counts as waiting time.
    local start_time = execute_after or next_tick(now)
    redis.call('HSET', key, 'state', 'queued', 'start_time', int(start_time))
    make_ready(now, id, tenant, priority, start_time)
  end
  count_by_tenant(pushed, tenant)
end
add_counters('pushed', pushed)
save_ticks()
return count
