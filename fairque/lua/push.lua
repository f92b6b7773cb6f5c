-- push: store tasks and make each ready, scheduled or deferred; all of them or none.
-- ARGV[6] = number of tasks n; ARGV[7] = MessagePack array of n rows {id, tenant,
-- priority, name, max_retries (-1 = unlimited), timeout (s), keep_result (0/1), start,
-- depends_on (ids: existing tasks, or tasks earlier in this batch)};
-- ARGV[8 ..] = the n payloads (opaque bytes, never decoded here). start is '' (now),
-- absolute microseconds, or '+' relative microseconds (from the server clock).
-- One blob instead of nine arguments per task keeps client-side packing cheap.
-- Returns the number of tasks stored.
--@include push

local PAYLOADS = FIRST_ARG + 1 -- the payload of task i is ARGV[PAYLOADS + i]
local rows = read_rows()
if rows == nil or #ARGV ~= PAYLOADS + #rows then
  return redis.error_reply('INVALID tasks do not match their count')
end
local now, refused = push_rows(rows, PAYLOADS)
if refused then return refused end
return flush(now, #rows)
