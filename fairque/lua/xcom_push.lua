-- xcom_push: a task stores a value under a key for its dependents (seed 000 XCom).
-- ARGV[6] = task id, ARGV[7] = key, ARGV[8] = value (MessagePack), ARGV[9] = TTL (ms).
--@include base

local key = PREFIX .. 'xcom:' .. ARGV[FIRST_ARG]
redis.call('HSET', key, ARGV[FIRST_ARG + 1], ARGV[FIRST_ARG + 2])
redis.call('PEXPIRE', key, tonumber(ARGV[FIRST_ARG + 3]))
return 1
