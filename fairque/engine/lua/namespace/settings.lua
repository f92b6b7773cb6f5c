-- namespace/settings: the settings every script of the namespace applies (see
-- include/settings.lua). A client created with settings writes them before its first
-- call; the last writer wins, and the reply says what the namespace had before, so the
-- writer can say what it changed. Settings nobody wrote read as their defaults.
-- KEYS: settings
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] 'read', or 'write' followed by name, value, name, value ... and then who writes
-- ARGV[3..] for 'write': the settings, then the writer (host:pid)
-- Returns {server time, flat name/value list as stored before this call (with changed_at
-- and changed_by, if ever written)}.
--@include base

local now = clock_now()
local before = redis.call('HGETALL', K.settings)
if ARGV[2] == 'write' then
  local pairs_and_writer = #ARGV - 2
  if pairs_and_writer % 2 ~= 1 then return redis.error_reply('INVALID settings odd arguments') end
  for i = 3, #ARGV - 1, 2 do
    if tonumber(ARGV[i + 1]) == nil then
      return redis.error_reply('INVALID ' .. ARGV[i] .. ' must be a number')
    end
    redis.call('HSET', K.settings, ARGV[i], ARGV[i + 1])
  end
  redis.call('HSET', K.settings, 'changed_at', now, 'changed_by', ARGV[#ARGV])
elseif ARGV[2] ~= 'read' then
  return redis.error_reply('INVALID op unknown operation ' .. tostring(ARGV[2]))
end
return {now, before}
