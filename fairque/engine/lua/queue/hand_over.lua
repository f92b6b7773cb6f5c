-- queue/hand_over: a worker leased tasks whose function it does not have (another
-- deployment's). Each goes back without counting an attempt, due again after `delay`, so
-- that a worker that serves its function takes it; when no live worker has served it for
-- `grace`, it fails for good ("no live worker serves NAME") instead of waiting forever.
-- Counted: handed_over, and unserved for those no live worker serves.
-- KEYS: scheduled leases stats clock state:finished state:failed state:canceled workers workers:expiry workers:functions settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the number of tasks n
-- ARGV[3] MessagePack array of n rows (id, lease token) one after the other
-- ARGV[4] delay before the task is offered again (us)
-- ARGV[5] grace: how long a task may wait for a worker that serves it (us)
-- Returns, per task, 1 if handed over (or failed), 0 if the caller no longer held its lease.
--@include ending
--@include workers

local rows = read_rows(ARGV[2], 2, ARGV[3])
if rows == nil then return redis.error_reply('INVALID tasks do not match their count') end
local delay, grace = tonumber(ARGV[4]), tonumber(ARGV[5])
local now = clock_now()
drop_expired_workers(now, 1000)
local wanted = {'name', 'unserved_since'}
local handed = each_held_lease(rows, 2, wanted, function(row, f)
  local id, name = row[1], f[1] or ''
  local key = task_key(id)
  local since = tonumber(f[2])
  if served(name) then
    since = nil
    redis.call('HDEL', key, 'unserved_since')
  elseif since == nil then
    since = now
    redis.call('HSET', key, 'unserved_since', now)
  end
  if since ~= nil and now - since >= grace then
    retry_or_fail(id, now, 'no live worker serves ' .. (name ~= '' and name or 'unnamed tasks'),
      false)
    return
  end
  redis.call('HSET', key, 'state', 'scheduled', 'execute_after', now + delay)
  redis.call('ZADD', K.scheduled, now + delay, id)
  note_due(now + delay, now)
  due_in_lane(name, now + delay)
  count('handed_over')
  if since ~= nil then count('unserved') end -- no live worker serves its name
end)
return flush(now, handed)
