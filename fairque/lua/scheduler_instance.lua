-- scheduler_instance: record an instance's state (e.g. stopped) with the server time.
-- ARGV[6] = instance id; ARGV[7] = its record (MessagePack map).
--@include schedule

record_instance(ARGV[FIRST_ARG], ARGV[FIRST_ARG + 1], clock_now())
return 1
