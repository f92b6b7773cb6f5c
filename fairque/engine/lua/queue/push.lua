-- push: store tasks and make each ready, scheduled or deferred; all of them or none.
-- One blob instead of ten arguments per task keeps client-side packing cheap.
-- KEYS: scheduled stats clock state:deferred strict:partitions constraints settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running names:defaults maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the number of tasks n
-- ARGV[3] MessagePack array of the n rows one after the other (a row is not an array of
--   its own: decoding a small table per row cost ~3k instructions): id, tenant,
--   priority, name, max_retries (-1 = unlimited), timeout (s), keep_result (0/1), start,
--   headers, the number k of its dependencies, then those k ids (existing tasks, or
--   tasks earlier in this batch); start is '' (now), absolute microseconds, or '+'
--   relative microseconds (from the server clock); headers is '' (none) or a map of
--   strings, stored MessagePack-encoded (the script's MessagePack has no bytes type)
-- ARGV[4..] the n payloads (opaque bytes, never decoded here)
-- Returns the number of tasks stored.
--@include push
--@include ending

local PAYLOADS = 3 -- the payload of task i is ARGV[PAYLOADS + i]
local tasks = tonumber(ARGV[2])
if tasks == nil or #ARGV ~= PAYLOADS + tasks then
  return redis.error_reply('INVALID tasks do not match their count')
end
local now, refused = push_rows(cmsgpack.unpack(ARGV[3]), tasks, PAYLOADS)
if refused then return refused end
return flush(now, tasks)
