-- jobs/result: hand over a kept result once (seed 003); later reads get nothing.
-- KEYS: result:<id>
-- ARGV[1] the key prefix (include/base.lua)
-- Returns the result object (MessagePack) or nil.

return redis.call('GETDEL', K.result)
