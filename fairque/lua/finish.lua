-- finish: acknowledge leased tasks as FINISHED, keeping results that were asked for.
-- ARGV[6] = number of tasks, then per task: id, lease token, result ('' = none).
-- Returns, per task, 1 if finished or 0 if the caller no longer held its lease.
--@include ending

local n = tonumber(ARGV[FIRST_ARG])
local now = clock_now()
local acked, unleased = {}, {}
for i = 1, n do
  local base = FIRST_ARG + 1 + (i - 1) * 3
  local id, token, result = ARGV[base], ARGV[base + 1], ARGV[base + 2]
  local f = redis.call('HMGET', task_key(id), 'state', 'lease_token', 'tenant', 'keep_result')
  if f[1] == 'started' and f[2] == token then
    unleased[#unleased + 1] = id
    end_task(id, f[3], 'finished', now, nil)
    if result ~= '' and f[4] == '1' and SETTINGS.finished_ttl > 0 then
      redis.call('SET', result_key(id), result, 'EX', math.ceil(SETTINGS.finished_ttl))
    end
    acked[i] = 1
  else
    acked[i] = 0
  end
end
if #unleased > 0 then call_chunked('ZREM', K.leases, unleased) end
return flush(now, acked)
