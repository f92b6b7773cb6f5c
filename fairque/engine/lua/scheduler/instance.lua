-- scheduler/instance: record an instance's state (e.g. stopped) with the server time.
-- KEYS: schedules:status scheduler:instances
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the instance id
-- ARGV[3] its record (MessagePack map)
--@include schedule

record_instance(ARGV[2], ARGV[3], clock_now())
return 1
