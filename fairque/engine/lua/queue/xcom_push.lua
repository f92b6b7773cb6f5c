-- xcom_push: a task stores a value under a key for its dependents (seed 000 XCom).
-- KEYS: settings xcom:<task>
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the key
-- ARGV[3] the value (MessagePack)
-- ARGV[4] how long the task's values live (ms; '': the namespace's xcom_ttl)
--@include settings

local refused = too_big('value', ARGV[3])
if refused then return refused end
redis.call('HSET', K.xcom, ARGV[2], ARGV[3])
redis.call('PEXPIRE', K.xcom, tonumber(ARGV[4]) or math.ceil(setting('xcom_ttl') * 1000))
return 1
