-- xcom_pull: the value a task stored under a key, or nil once absent or expired.
-- ARGV[6] = task id, ARGV[7] = key.
--@include base

return redis.call('HGET', PREFIX .. 'xcom:' .. ARGV[FIRST_ARG], ARGV[FIRST_ARG + 1])
