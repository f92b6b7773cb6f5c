-- finish_pop: queue/finish then queue/pop in one call, for a worker that acknowledges the
-- tasks it ran in the pop for the slots they freed. The effect and the replies are those
-- of the two calls in turn, with one call's fixed cost (its clock, housekeeping reads,
-- counter flush and round trip) instead of two. The finishes come first: the pop's
-- housekeeping applies the leases they ended, so it sees the slots and limits they freed.
-- KEYS: scheduled leases stats clock state:deferred state:finished state:failed state:canceled strict:partitions constraints settings running shares sleeping turns ready:total ready:tenants lanes stats:tenants wakeups:any wakeups:until workers:functions names:running names:defaults maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the number of tasks n to finish
-- ARGV[3] MessagePack array of n rows (id, lease token, result slot) one after the
--   other; a slot k > 0 means the result is ARGV[4 + k], 0 none
-- ARGV[4] the number of results r
-- ARGV[5..] the r results (opaque bytes); then queue/pop's ARGV[2..]: the worker id,
--   count, lease seconds, the task names and the tenants
-- Returns queue/finish's reply (per task, 1 if finished or 0 if the caller no longer held
-- its lease), then queue/pop's rows.
--@include ending
--@include serving

local results = tonumber(ARGV[4])
if results == nil or results < 0 or results % 1 ~= 0 or #ARGV < 9 + results then
  return redis.error_reply('INVALID results count ' .. tostring(ARGV[4]) ..
    ' does not match the arguments')
end
local rows, refused = finish_rows(ARGV[2], ARGV[3], 5, results)
if rows == nil then return refused end
local now = clock_now()
local finished = {}
if #rows > 0 then
  settings_held() -- the finish's limits and the pop's defaults, asked at once
  finished = finish_held(rows, 5, now)
end
return flush(now, pop_tasks(now, 5 + results, finished))
