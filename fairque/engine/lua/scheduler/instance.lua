-- scheduler/instance: record an instance's state (e.g. stopped) with the server time.
-- KEYS: schedules:status scheduler:instances
-- ARGV[1..5] the namespace head (include/base.lua)
-- ARGV[6] the instance id
-- ARGV[7] its record (MessagePack map)
--@include schedule

record_instance(ARGV[6], ARGV[7], clock_now())
return 1
