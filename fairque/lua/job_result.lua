-- job_result: hand over a kept result once (seed 003); later reads get nothing.
-- ARGV[6] = id. Returns the result object (MessagePack) or nil.
--@include base

return redis.call('GETDEL', result_key(ARGV[FIRST_ARG]))
