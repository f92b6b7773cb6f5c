-- scheduler/unlock: release a lock if the owner token still owns it; the compare and
-- the delete are one step.
-- KEYS: schedules:next schedules:status scheduler:lock:<id>
-- ARGV[1..5] the namespace head (include/base.lua)
-- ARGV[6] the schedule id
-- ARGV[7] the owner token
-- Returns 1 or 0.
--@include schedule_lock

return release_lock(ARGV[7])
