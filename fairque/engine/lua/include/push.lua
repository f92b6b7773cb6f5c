-- Storing new tasks: shared by push and by the scheduler's fire.
--@include ready
--@include settings

-- What a new task takes for the priority, max_retries and timeout its push row leaves
-- out (''): its name's defaults (queue/limits.lua), else these.
local NEW_TASK_DEFAULTS = NEW_TASK.DEFAULTS
local DEFAULT_PRIORITY = NEW_TASK_DEFAULTS.priority
local DEFAULT_RETRIES = NEW_TASK_DEFAULTS.max_retries
local DEFAULT_TIMEOUT = NEW_TASK_DEFAULTS.timeout

-- HSET of `key`'s fields and values, with its name first unless it is '': one command
-- (a second HSET for the name cost a batched push of named tasks ~8%).
local function hset_named(key, name, ...)
  if name == '' then return redis.call('HSET', key, ...) end
  return redis.call('HSET', key, 'name', name, ...)
end

-- Stores the `rows` tasks of the flat `values` (see queue/push.lua for their layout) as
-- new tasks, each ready, scheduled or deferred; the payload of task i is
-- ARGV[payload_at + i]. Everything is checked before anything is written, so a refusal
-- leaves no trace. Returns the server time, or nil and the error reply. A row begins
-- where the one before it ends (its dependencies are its last values): each pass walks
-- them again rather than keeping where each begins, and the tables a batch needs (its
-- keys, its ids seen) are not made for one task (each table cost a one-task push ~2k).
local function push_rows(values, rows, payload_at)
  rows = tonumber(rows)
  if type(values) ~= 'table' or rows == nil then
    return nil, redis.error_reply('INVALID tasks do not match their count')
  end
  local at = 1
  for _ = 1, rows do
    local dependencies = values[at + PUSH_ROW.dependencies]
    if type(dependencies) ~= 'number' or dependencies < 0 or dependencies % 1 ~= 0 then
      return nil, redis.error_reply('INVALID tasks do not match their count')
    end
    at = at + PUSH_ROW.WIDTH + dependencies
  end
  if at ~= #values + 1 then return nil, redis.error_reply('INVALID tasks do not match their count') end
  -- Refuse the whole batch before writing anything.
  local many = rows > 1
  local keys, seen = nil, nil
  if many then keys, seen = {}, {} end
  local dependency_state, unknown = nil, nil -- made by the first dependency
  at = 1
  for i = 1, rows do
    local after = at + PUSH_ROW.WIDTH + values[at + PUSH_ROW.dependencies]
    for j = at + PUSH_ROW.WIDTH, after - 1 do
      if dependency_state == nil then dependency_state, unknown = {}, {} end
      local dependency = values[j]
      if type(dependency) ~= 'string' or dependency == '' then
        return nil, redis.error_reply('INVALID depends_on of task ' .. i)
      end
      if not (seen and seen[dependency]) and dependency_state[dependency] == nil then
        local state = redis.call('HGET', task_key(dependency), 'state')
        if not state then
          unknown[#unknown + 1] = dependency
        elseif state == 'canceled' then
          return nil, redis.error_reply('CANCELED_DEPENDENCY ' .. dependency)
        else
          dependency_state[dependency] = state
        end
      end
    end
    local id, tenant = values[at + PUSH_ROW.task_id], values[at + PUSH_ROW.tenant]
    if type(id) ~= 'string' or id == '' or type(tenant) ~= 'string' or tenant == '' then
      return nil, redis.error_reply('INVALID task_id or user_id of task ' .. i)
    end
    local name = values[at + PUSH_ROW.name]
    if type(name) ~= 'string' then
      return nil, redis.error_reply('INVALID name of task ' .. i)
    end
    local headers = values[at + PUSH_ROW.headers]
    if headers ~= '' and type(headers) ~= 'table' then
      return nil, redis.error_reply('INVALID headers of task ' .. i)
    end
    local priority = values[at + PUSH_ROW.priority] -- '': its default, valid by its bounds
    local refused = too_big('payload', ARGV[payload_at + i])
    if refused then return nil, refused end
    if seen and seen[id] then return nil, redis.error_reply('DUPLICATE ' .. id) end
    if priority ~= '' and (type(priority) ~= 'number' or priority < 1 or priority > CRITICAL
        or priority % 1 ~= 0) then
      return nil, redis.error_reply('INVALID priority ' .. tostring(priority))
    end
    if many then
      seen[id] = true
      keys[i] = task_key(id)
    end
    at = after
  end
  if unknown and #unknown > 0 then return nil, redis.error_reply('UNKNOWN_DEPENDENCY ' .. table.concat(unknown, ' ')) end
  local one_key = nil -- the key of a call's one task
  if many then
    for first = 1, rows, CHUNK do
      local last = math.min(first + CHUNK - 1, rows)
      if redis.call('EXISTS', unpack(keys, first, last)) > 0 then
        at = 1
        for i = 1, last do
          if i >= first and redis.call('EXISTS', keys[i]) == 1 then
            return nil, redis.error_reply('DUPLICATE ' .. values[at + PUSH_ROW.task_id])
          end
          at = at + PUSH_ROW.WIDTH + values[at + PUSH_ROW.dependencies]
        end
      end
    end
  elseif rows == 1 then
    one_key = task_key(values[1 + PUSH_ROW.task_id])
    if exists_noting_defaults(one_key) then
      return nil, redis.error_reply('DUPLICATE ' .. values[1 + PUSH_ROW.task_id])
    end
  end

  local now = clock_now()
  local links = 0
  local named_defaults = nil -- whether any task name has defaults, asked once if needed
  at = 1
  for i = 1, rows do
    local id, tenant = values[at + PUSH_ROW.task_id], values[at + PUSH_ROW.tenant]
    local name, priority = values[at + PUSH_ROW.name], values[at + PUSH_ROW.priority]
    local retries, timeout = values[at + PUSH_ROW.max_retries], values[at + PUSH_ROW.timeout]
    local key = one_key or keys[i]
    local after = at + PUSH_ROW.WIDTH + values[at + PUSH_ROW.dependencies]
    if priority == '' or retries == '' or timeout == '' then
      -- Inline, and no lookup while no name has defaults: this runs for most tasks.
      if named_defaults == nil then named_defaults = defaults_exist() end
      local set = named_defaults and defaults_of(name) or TASK_DEFAULTS
      if priority == '' then priority = set.priority > 0 and set.priority or DEFAULT_PRIORITY end
      if retries == '' then retries = set.max_retries >= 0 and set.max_retries or DEFAULT_RETRIES end
      if timeout == '' then
        timeout = set.timeout > 0 and tostring(set.timeout / MICROS) or DEFAULT_TIMEOUT
      end
    end
    local execute_after = parse_start(values[at + PUSH_ROW.start], now)
    -- Dependencies that have finished already do not block (seed 000).
    local open = nil
    for j = at + PUSH_ROW.WIDTH, after - 1 do
      if dependency_state[values[j]] ~= 'finished' then
        open = open or {}
        open[#open + 1] = values[j]
      end
    end
    local state, time_field, time_value
    if open then
      state, time_field, time_value = 'deferred', 'deferred_at', now
      append('SADD', K['state:deferred'], id)
      for _, dependency in ipairs(open) do
        redis.call('SADD', waiting_key(dependency), id)
        redis.call('HSET', task_key(dependency), 'has_dependents', 1)
      end
      redis.call('SADD', blocked_key(id), unpack(open))
      links = links + #open
    elseif execute_after ~= nil and execute_after > now then
      state, time_field, time_value = 'scheduled', 'execute_after', execute_after
      append('ZADD', K.scheduled, execute_after, id)
      note_due(execute_after, now)
      due_in_lane(name, execute_after)
    else
      -- A task due in the past has been ready since then; that counts as waiting time.
      state, time_field, time_value = 'queued', 'start_time', execute_after or next_tick(now)
      queue_ready(id, 'task', tenant, name, priority, time_value)
    end
    -- Fields left out read as their defaults: no name, attempts 0, keep_result 0.
    hset_named(key, name, 'kind', 'task', 'tenant', tenant,
      'priority', priority, 'payload', ARGV[payload_at + i],
      'max_retries', retries, 'timeout', timeout, 'created_at', now, 'state', state, time_field,
      time_value)
    if values[at + PUSH_ROW.keep_result] == 1 then redis.call('HSET', key, 'keep_result', 1) end
    -- Headers are rare: a task without them gets no field, and no command.
    local headers = values[at + PUSH_ROW.headers]
    if headers ~= '' then redis.call('HSET', key, 'headers', cmsgpack.pack(headers)) end
    if state == 'deferred' and execute_after ~= nil then
      redis.call('HSET', key, 'execute_after', execute_after)
    end
    count('pushed', tenant)
    at = after
  end
  if links > 0 then redis.call('HINCRBY', K.stats, 'dependency_links', links) end
  return now
end
