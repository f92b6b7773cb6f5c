-- push: store tasks and make each ready, scheduled or deferred; all of them or none.
-- One blob instead of nine arguments per task keeps client-side packing cheap.
-- KEYS: ring ready scheduled stats clock state:deferred strict:partitions constraints settings running shares sleeping turns ready:total stats:tenants wakeups
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the number of tasks n
-- ARGV[3] MessagePack array of n rows {id, tenant, priority, name, max_retries
--   (-1 = unlimited), timeout (s), keep_result (0/1), start, depends_on (ids: existing
--   tasks, or tasks earlier in this batch)}; start is '' (now), absolute microseconds,
--   or '+' relative microseconds (from the server clock)
-- ARGV[4..] the n payloads (opaque bytes, never decoded here)
-- Returns the number of tasks stored.
--@include push

local PAYLOADS = 3 -- the payload of task i is ARGV[PAYLOADS + i]
local rows = read_rows(ARGV[2], ARGV[3])
if rows == nil or #ARGV ~= PAYLOADS + #rows then
  return redis.error_reply('INVALID tasks do not match their count')
end
local now, refused = push_rows(rows, PAYLOADS)
if refused then return refused end
return flush(now, #rows)
