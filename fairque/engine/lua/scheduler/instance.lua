-- scheduler/instance: record an instance's state (e.g. stopped) with the server time.
-- KEYS: scheduler:instances scheduler:instances:expiry
-- ARGV[1..5] the namespace head (include/base.lua)
-- ARGV[6] the instance id
-- ARGV[7] its record (MessagePack map)
-- ARGV[8] the record's time to live (us)
--@include scheduler_instances

local now = clock_now()
drop_expired_instances(now)
record_instance(ARGV[6], ARGV[7], now, tonumber(ARGV[8]))
return 1
