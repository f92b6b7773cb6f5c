-- The namespace's settings (QueueSettings in fairque/config.py), held by the server in
-- K.settings so that every client and script of the namespace applies the same ones; a
-- setting nobody wrote reads as its default (the same as QueueSettings', a test checks).
-- Each setting is read once per call, and only by calls that need it: one field's HGET
-- cost a push ~5k instructions less than the whole hash's HGETALL and its table.
--@include base

local DEFAULT_SETTINGS = {
  max_payload_bytes = 1048576,
  retry_backoff_base = 1.0,
  retry_backoff_max = 3600.0,
  finished_ttl = 86400.0,
  failed_ttl = 604800.0,
  maintenance_batch = 100,
  xcom_ttl = 86400.0,
}

-- Most calls read one setting (a push its payload limit): the first read is kept in
-- first_setting and first_value, and the table of the others is made by a second (it
-- cost a one-task push ~2k instructions).
local first_setting, first_value, stored_settings = nil, nil, nil
local function setting(name)
  if name == first_setting then return first_value end
  local value = stored_settings and stored_settings[name]
  if value == nil then
    value = tonumber(redis.call('HGET', K.settings, name)) or DEFAULT_SETTINGS[name]
    if first_setting == nil then
      first_setting, first_value = name, value
    else
      stored_settings = stored_settings or {}
      stored_settings[name] = value
    end
  end
  return value
end

-- Refuses a value (a payload, a result) over the namespace's max_payload_bytes; nil if
-- it is within the limit, else the error reply.
local function too_big(field, value)
  local limit = setting('max_payload_bytes')
  if #value > limit then
    return redis.error_reply('INVALID ' .. field .. ' is ' .. #value ..
      ' bytes serialised, over the ' .. int(limit) .. ' limit')
  end
  return nil
end
