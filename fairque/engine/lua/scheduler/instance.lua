-- scheduler/instance: record an instance's state (e.g. stopped) with the server time.
-- KEYS: scheduler:instances scheduler:instances:expiry
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the instance id
-- ARGV[3] its record (MessagePack map)
-- ARGV[4] the record's time to live (us)
--@include base
--@include scheduler_instances

local now = clock_now()
drop_expired_instances(now)
record_instance(ARGV[2], ARGV[3], now, tonumber(ARGV[4]))
return 1
