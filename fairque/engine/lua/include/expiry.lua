-- Lease expiry: a task whose worker stopped answering, of any kind (the fair queue's, a
-- strict job, a storage task: they share K.leases), runs again or fails.
--@include ending

-- Returns every task whose lease expired, at most `limit`, to ready (attempts + 1,
-- prev_start_time kept; storage tasks to their numbered queue), or to FAILED once its
-- attempts are used up; each such attempt's error is `lease expired`, on the worker that
-- held it. Returns how many leases expired.
local function reap_expired(now, limit)
  local ids = redis.call('ZRANGEBYSCORE', K.leases, '-inf', now, 'LIMIT', 0, limit)
  if #ids == 0 then return 0 end
  redis.call('ZREM', K.leases, unpack(ids))
  for _, id in ipairs(ids) do
    local key = task_key(id)
    local f = redis.call('HMGET', key, 'tenant', 'priority', 'attempts', 'max_retries', 'start_time',
      'kind', 'queue', 'name', 'worker_id', 'errors')
    local tenant, priority = f[1], tonumber(f[2])
    local attempts, max_retries = (tonumber(f[3]) or 0) + 1, tonumber(f[4])
    local errors = with_error(f[10], now, attempts, f[9], false, 'lease expired')
    count('expired', tenant)
    lease_ended(f[6], tenant, f[8])
    if max_retries >= 0 and attempts > max_retries then
      redis.call('HSET', key, 'attempts', attempts, 'prev_start_time', f[5], 'errors', errors)
      end_task(id, tenant, 'failed', now, 'lease expired')
    else
      local start_time = next_tick(now)
      redis.call('HSET', key, 'state', 'queued', 'attempts', attempts, 'prev_start_time', f[5],
        'start_time', start_time, 'last_error', 'lease expired', 'errors', errors)
      if f[6] == 'storage' then -- back to its numbered queue (seed 004)
        append('ZADD', storage_queue_key(f[7]), start_time, id)
      else
        queue_ready(id, f[6], tenant, f[8] or '', priority, start_time)
      end
    end
  end
  return #ids
end
