-- fairness: who the queue served in the last minutes (include/fairness.lua): all starts
-- and their waits, and the busiest tenants' starts, waits and shares. Bounded by
-- window * top, whatever the number of tenants, so a live view may call it every second.
-- KEYS: shares running sleeping ready:tenants
-- FLAGS: no-writes
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the window, in minutes (1 to 10; the current minute is the last)
-- ARGV[3] how many of the busiest tenants (1 to 100)
-- Returns fairness_reply (include/fairness.lua).
--@include fairness

local window, top = tonumber(ARGV[2]), tonumber(ARGV[3])
if window == nil or window < 1 or window > 10 or top == nil or top < 1 or top > 100 then
  return redis.error_reply('INVALID window must be 1 to 10 minutes and top 1 to 100')
end
return fairness_reply(clock_now(), window, top)
