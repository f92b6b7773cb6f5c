-- namespace/settings: the settings every script of the namespace applies (see
-- include/settings.lua), and the data format of the namespace. A client writes before its
-- first call (its settings, if it was given any): the last writer wins, and the reply
-- says what the namespace had before, so the writer can say what it changed. Settings
-- nobody wrote read as their defaults.
--
-- The field `format` records the data format that wrote the namespace (the layout of its
-- keys and records; data from before formats were recorded is format 1). A write from a
-- client of an older format is refused before anything is written, so an old release
-- never writes into data it does not know; one of the same or a newer format records
-- its own (upgrades of the data itself, when a format changes them, run here).
-- KEYS: settings ready ready:tenants lanes
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] 'read', or 'write'
-- ARGV[3..] for 'write': the client's data format, then name, value, name, value ..., then
--   who writes (host:pid)
-- Returns {server time, flat name/value list as stored before this call (with format,
-- changed_at and changed_by, if ever written)}, or for a client of an older format the
-- error 'NEWER_FORMAT <prefix> <recorded format> <client format>'.
--@include base

-- Format 2 put fair tasks in lanes, one per task name (include/base.lua): format 1's
-- queues become the lane of unnamed tasks, whose keys they already have; its tasks with
-- a name wait there until a pop hands them over to their lane (queue/hand_over.lua).
-- Only the entries over lanes are new: O(tenants with ready tasks), once.
local function upgrade_to_lanes()
  local entries = redis.call('ZRANGE', K.ready, 0, -1, 'WITHSCORES')
  for i = 1, #entries, 2 do
    local tenant = entries[i]
    redis.call('ZADD', K['ready:tenants'], math.floor(tonumber(entries[i + 1]) / 64), tenant)
    redis.call('SADD', lanes_of_key(tenant), '')
  end
  if #entries > 0 then redis.call('SADD', K.lanes, '') end
end

local now = clock_now()
local before = redis.call('HGETALL', K.settings)
if ARGV[2] == 'write' then
  local format = tonumber(ARGV[3])
  local pairs_and_writer = #ARGV - 3
  if format == nil or pairs_and_writer % 2 ~= 1 then
    return redis.error_reply('INVALID settings odd arguments')
  end
  local raw = redis.call('HGET', K.settings, 'format')
  local recorded = tonumber(raw) or 1
  if recorded > format then
    return redis.error_reply('NEWER_FORMAT ' .. PREFIX .. ' ' .. recorded .. ' ' .. format)
  end
  for i = 4, #ARGV - 1, 2 do
    if tonumber(ARGV[i + 1]) == nil then
      return redis.error_reply('INVALID ' .. ARGV[i] .. ' must be a number')
    end
  end
  if recorded < 2 and format >= 2 then upgrade_to_lanes() end
  if raw ~= tostring(format) then redis.call('HSET', K.settings, 'format', format) end
  for i = 4, #ARGV - 1, 2 do redis.call('HSET', K.settings, ARGV[i], ARGV[i + 1]) end
  if pairs_and_writer > 1 then
    redis.call('HSET', K.settings, 'changed_at', now, 'changed_by', ARGV[#ARGV])
  end
elseif ARGV[2] ~= 'read' then
  return redis.error_reply('INVALID op unknown operation ' .. tostring(ARGV[2]))
end
return {now, before}
