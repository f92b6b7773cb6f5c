-- scheduler/unlock: release locks that their owner tokens still own; each compare and
-- delete is one step.
-- KEYS: scheduler:lock:<id>...
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2..] the owner token of each lock, in the order of the keys
-- Returns the number of locks released.
--@include schedule_lock

local released = 0
for n = 1, #KEYS - KEY_COUNT do
  released = released + release_lock(KEYS[KEY_COUNT + n], ARGV[1 + n])
end
return released
