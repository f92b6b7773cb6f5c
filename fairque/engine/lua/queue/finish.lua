-- finish: acknowledge leased tasks as FINISHED, keeping results that were asked for.
-- KEYS: scheduled leases stats clock state:deferred state:finished state:failed state:canceled strict:partitions constraints settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the number of tasks n
-- ARGV[3] MessagePack array of n rows (id, lease token, result slot) one after the
--   other; a slot k > 0 means the result is ARGV[3 + k], 0 none
-- ARGV[4..] the results (opaque bytes)
-- Returns, per task, 1 if finished or 0 if the caller no longer held its lease.
--@include ending

-- A finish of nothing (an empty MessagePack array) returns before it decodes anything.
if ARGV[2] == '0' and ARGV[3] == '\144' and #ARGV == 3 then return {} end
local rows, refused = finish_rows(ARGV[2], ARGV[3], 4, #ARGV - 3)
if rows == nil then return refused end
if #rows == 0 then return {} end -- nothing to acknowledge: no clock, no writes
local now = clock_now()
return flush(now, finish_held(rows, 4, now))
