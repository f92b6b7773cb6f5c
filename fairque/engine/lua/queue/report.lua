-- report: what a running task (or strict job: engine/records.py calls it for both) says
-- about itself, kept in its record: its progress (a number and a short message) and log
-- lines, the newest `max_lines` of them.
-- KEYS: task:<id>
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the id
-- ARGV[3] the lease token
-- ARGV[4] the progress ('' to leave it as it is)
-- ARGV[5] the progress message
-- ARGV[6] max_lines: how many log lines the record keeps
-- ARGV[7..] log lines to add
-- Returns how many log lines the record holds. Publishes the id on the namespace's
-- `ended` channel, as an ending does, so a producer waiting on queue.result with
-- on_progress hears of it.
--@include lease

local id, token, progress = ARGV[2], ARGV[3], ARGV[4]
if not holds_lease(id, token) then return redis.error_reply('LEASE_LOST ' .. id) end
local key = K.task
if progress ~= '' then
  redis.call('HSET', key, 'progress', progress, 'progress_message', ARGV[5],
    'progress_at', clock_now())
end
local max_lines = tonumber(ARGV[6])
local stored = redis.call('HGET', key, 'logs')
local lines = stored and cmsgpack.unpack(stored) or {}
if #ARGV > 6 then
  for i = 7, #ARGV do lines[#lines + 1] = ARGV[i] end
  local kept = {}
  for i = math.max(1, #lines - max_lines + 1), #lines do kept[#kept + 1] = lines[i] end
  lines = kept
  redis.call('HSET', key, 'logs', cmsgpack.pack(lines))
end
redis.call('SPUBLISH', PREFIX .. 'ended', cmsgpack.pack({id}))
return #lines
