-- cancel: a record that has not started (scheduled, deferred or queued) becomes
-- CANCELED; with ARGV[3] = 1 a running fair-queue task does too, and its id is published
-- on the namespace's `abort` channel for the worker that runs it. Its dependents can
-- never run, so they are canceled too, with the reason recorded, and the dependency sets
-- are cleaned in both directions (seed 000, design section 7).
-- KEYS: scheduled leases stats clock state:deferred state:finished state:failed state:canceled settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the id
-- ARGV[3] 1 to abort a running task, 0 to leave it
-- Returns 1 if the record was canceled, 0 if it had ended (or runs and is left).
--@include cancel

local id, abort = ARGV[2], ARGV[3] == '1'
if redis.call('EXISTS', task_key(id)) == 0 then return redis.error_reply('NOT_FOUND ' .. id) end
local now = clock_now()
local state, canceled = cancel_with_dependents(id, 'canceled', now, abort)
if canceled and state == 'started' then
  -- A MessagePack array of ids, as on `ended`.
  redis.call('SPUBLISH', PREFIX .. 'abort', cmsgpack.pack({id}))
end
return flush(now, canceled and 1 or 0)
