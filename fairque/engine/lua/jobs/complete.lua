-- jobs/complete: the outcomes of leased strict-policy jobs (seed 003 result objects),
-- each on its own: a lost lease or a refused result leaves the others recorded.
-- KEYS: scheduled leases stats clock state:deferred state:finished state:failed state:canceled strict:partitions constraints settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the number of outcomes n
-- ARGV[3] MessagePack array of n rows (id, lease token, kind, retry, message, result
--   ttl, error type, traceback) one after the other: kind is success, failure, or release (back to the queue, attempts unchanged: it
--   never reached a worker); retry is 1 if a failure may be retried; the result object
--   is kept for result ttl seconds when the job asked for it (0: never); a failure's
--   error type and traceback ('' if none) join the job's `errors` with its message
-- ARGV[4..] the n result objects (MessagePack)
-- Returns per outcome the job's new state, or '!' and the error of that outcome
-- ('!LEASE_LOST <id>' if the caller no longer held the lease).
--@include ending
--@include lease

local WIDTH = 8
local rows = read_rows(ARGV[2], WIDTH, ARGV[3], true)
if rows == nil then return redis.error_reply('INVALID outcomes do not match their count') end

local now = clock_now()

local function complete(row, result)
  local id, token, kind, retry = row[1], row[2], row[3], row[4] == 1
  local message, result_ttl, error_type, traceback = row[5], tonumber(row[6]), row[7], row[8]
  if type(id) ~= 'string' or type(token) ~= 'string' or type(message) ~= 'string'
      or result_ttl == nil or type(error_type) ~= 'string' or type(traceback) ~= 'string' then
    return '!INVALID outcome malformed'
  end
  if not holds_lease(id, token) then return '!LEASE_LOST ' .. id end
  local refused = too_big('result', result)
  if refused then return '!' .. refused.err end
  redis.call('ZREM', K.leases, id)
  local f = redis.call('HMGET', task_key(id), 'partition', 'keep_result', 'has_dependents')
  for _, cid in ipairs(split_partition(f[1])) do redis.call('ZREM', running_key(cid), id) end
  local state = 'finished'
  if kind == 'release' then
    state = 'queued'
    redis.call('HSET', task_key(id), 'state', state)
    queue_strict(id)
    count('released')
  elseif kind == 'success' then
    end_task(id, false, 'finished', now, nil)
    if f[3] then release_dependents(id, now) end
  else
    state = retry_or_fail(id, now, message, retry, error_type, traceback)
  end
  -- Only a final outcome is kept: the pusher gets the last attempt's.
  if f[2] == '1' and (state == 'finished' or state == 'failed') and result_ttl > 0 then
    redis.call('SET', result_key(id), result, 'EX', math.ceil(result_ttl))
  end
  return state
end

local states = {}
for i, row in each_row(rows, WIDTH) do states[i] = complete(row, ARGV[3 + i]) end
return flush(now, states)
