-- pop: lease up to `count` ready tasks by the fair policy (design section 5).
-- ARGV[6] = worker id, ARGV[7] = count, ARGV[8] = lease seconds ('' = each task's timeout),
-- ARGV[9] = reap/promote batch limit, ARGV[10] = 1 when the worker names tenants,
-- ARGV[11] = number of assigned tenants, then those, then the number of steal
-- targets, then those.
-- Returns, per leased task: id, tenant, priority, name, payload, attempts, lease deadline
-- (us), lease token, timeout, max_retries, created_at, start_time, prev_start_time.
--@include maintenance

local worker_id = ARGV[FIRST_ARG]
local count = tonumber(ARGV[FIRST_ARG + 1])
local lease_seconds = tonumber(ARGV[FIRST_ARG + 2])
local limit = tonumber(ARGV[FIRST_ARG + 3])
local assigned, steal = nil, nil
if ARGV[FIRST_ARG + 4] == '1' then
  local n = tonumber(ARGV[FIRST_ARG + 5])
  assigned = {unpack(ARGV, FIRST_ARG + 6, FIRST_ARG + 5 + n)}
  local m = tonumber(ARGV[FIRST_ARG + 6 + n])
  steal = {unpack(ARGV, FIRST_ARG + 7 + n, FIRST_ARG + 6 + n + m)}
end

local now = clock_now()
-- Housekeeping rides along with every pop, so a lone worker needs no separate reaper.
reap_expired(now, limit)
promote_due(now, limit)

local leased, started, taken = {}, {}, 0
while taken < count do
  local tenant = next_tenant(assigned, steal)
  if tenant == nil then break end
  local id = serve_tenant(tenant, now)
  if id then
    local key = task_key(id)
    local f = redis.call('HMGET', key, 'priority', 'name', 'payload', 'attempts', 'timeout',
      'max_retries', 'created_at', 'start_time', 'prev_start_time')
    local deadline = now + math.floor((lease_seconds or tonumber(f[5])) * MICROS)
    local token = int(next_tick(now))
    redis.call('ZADD', K.leases, deadline, id)
    redis.call('HSET', key, 'state', 'started', 'leased_at', int(now),
      'lease_deadline', int(deadline), 'lease_token', token, 'worker_id', worker_id)
    local row = {id, tenant, f[1], f[2] or '', f[3], f[4], int(deadline), token, f[5], f[6], f[7],
      f[8], f[9] or ''}
    for _, value in ipairs(row) do leased[#leased + 1] = value end
    count_by_tenant(started, tenant)
    taken = taken + 1
  end
end
add_counters('started', started)
save_ticks()
return leased
