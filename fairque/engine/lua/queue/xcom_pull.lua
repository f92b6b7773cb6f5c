-- xcom_pull: the value a task stored under a key, or nil once absent or expired.
-- KEYS: xcom:<task>
-- ARGV[1..5] the namespace head (include/base.lua)
-- ARGV[6] the key
--@include base

return redis.call('HGET', K.xcom, ARGV[6])
