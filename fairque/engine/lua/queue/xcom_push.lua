-- xcom_push: a task stores a value under a key for its dependents (seed 000 XCom).
-- KEYS: xcom:<task>
-- ARGV[1..5] the namespace head (include/base.lua)
-- ARGV[6] the key
-- ARGV[7] the value (MessagePack)
-- ARGV[8] how long the task's values live (ms)
--@include base

redis.call('HSET', K.xcom, ARGV[6], ARGV[7])
redis.call('PEXPIRE', K.xcom, tonumber(ARGV[8]))
return 1
