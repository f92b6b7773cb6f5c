-- scheduler_unlock: release a lock if ARGV[7] (the owner token) still owns it; the
-- compare and the delete are one step. ARGV[6] = schedule id. Returns 1 or 0.
--@include schedule

return release_lock(ARGV[FIRST_ARG + 1])
