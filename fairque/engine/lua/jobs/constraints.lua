-- jobs/constraints: every constraint with its current use.
-- KEYS: constraints
-- FLAGS: no-writes
-- ARGV[1] the key prefix (include/base.lua)
-- Returns per constraint: id, definition (MessagePack), jobs running, jobs started
-- within its rate period.
--@include strict

local now = clock_now()
local reply = {}
local all = current_constraints()
for i = 1, #all, 2 do
  local cid, c = all[i], read_constraint(all[i + 1])
  local running = redis.call('ZCOUNT', running_key(cid), '(' .. int(now), '+inf')
  local started = 0
  if c.rate > 0 then
    started = redis.call('ZCOUNT', starts_key(cid), '(' .. int(now - c.period * MICROS), '+inf')
  end
  reply[#reply + 1] = cid
  reply[#reply + 1] = all[i + 1]
  reply[#reply + 1] = running
  reply[#reply + 1] = started
end
return reply
