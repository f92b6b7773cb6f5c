-- finish: acknowledge leased tasks as FINISHED, keeping results that were asked for.
-- KEYS: scheduled leases stats clock state:deferred state:finished state:failed state:canceled strict:partitions constraints settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any names:running
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the number of tasks n
-- ARGV[3] MessagePack array of n rows (id, lease token, result slot) one after the
--   other; a slot k > 0 means the result is ARGV[3 + k], 0 none
-- ARGV[4..] the results (opaque bytes)
-- Returns, per task, 1 if finished or 0 if the caller no longer held its lease.
--@include ending

local rows = read_rows(ARGV[2], 3, ARGV[3])
if rows == nil then return redis.error_reply('INVALID tasks do not match their count') end
if #rows == 0 then return {} end -- nothing to acknowledge: no clock, no writes
for i = 4, #ARGV do
  local refused = too_big('result', ARGV[i])
  if refused then return refused end
end
local now = clock_now()
local wanted = {'keep_result', 'has_dependents'}
local finished = each_held_lease(rows, 3, wanted, function(row, f, _, tenant)
  local id, slot = row[1], row[3]
  end_task(id, tenant, 'finished', now, nil)
  if f[2] then release_dependents(id, now) end
  if slot > 0 and f[1] == '1' and setting('finished_ttl') > 0 then
    redis.call('SET', result_key(id), ARGV[3 + slot], 'EX', math.ceil(setting('finished_ttl')))
  end
end)
return flush(now, finished)
