-- finish: acknowledge leased tasks as FINISHED, keeping results that were asked for.
-- ARGV[6] = number of tasks n; ARGV[7] = MessagePack array of n rows {id, lease token,
-- result slot}; a slot k > 0 means the result is ARGV[7 + k] (opaque bytes), 0 none.
-- Returns, per task, 1 if finished or 0 if the caller no longer held its lease.
--@include ending

local n = tonumber(ARGV[FIRST_ARG])
local rows = cmsgpack.unpack(ARGV[FIRST_ARG + 1])
if type(rows) ~= 'table' or #rows ~= n then
  return redis.error_reply('INVALID tasks do not match their count')
end
local now = clock_now()
local acked, unleased = {}, {}
for i, row in ipairs(rows) do
  local id, token, slot = row[1], row[2], row[3]
  local f = redis.call('HMGET', task_key(id), 'state', 'lease_token', 'tenant', 'keep_result')
  if f[1] == 'started' and f[2] == token then
    unleased[#unleased + 1] = id
    end_task(id, f[3], 'finished', now, nil)
    if slot > 0 and f[4] == '1' and SETTINGS.finished_ttl > 0 then
      redis.call('SET', result_key(id), ARGV[FIRST_ARG + 1 + slot], 'EX',
        math.ceil(SETTINGS.finished_ttl))
    end
    acked[i] = 1
  else
    acked[i] = 0
  end
end
if #unleased > 0 then call_chunked('ZREM', K.leases, unleased) end
return flush(now, acked)
