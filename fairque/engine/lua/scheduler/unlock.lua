-- scheduler/unlock: release a lock if the owner token still owns it; the compare and
-- the delete are one step.
-- KEYS: scheduler:lock:<id>
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the schedule id
-- ARGV[3] the owner token
-- Returns 1 or 0.
--@include schedule_lock

return release_lock(K['scheduler:lock'], ARGV[3])
