-- xcom_pull: the value a task stored under a key, or nil once absent or expired.
-- KEYS: xcom:<task>
-- FLAGS: no-writes
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the key

return redis.call('HGET', K.xcom, ARGV[2])
