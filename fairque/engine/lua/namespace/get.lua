-- get: one record's fields, its kept result, what it waits for and what waits for it.
-- KEYS: task:<id> result:<id> deps:blocked:<id> deps:waiting:<id>
-- FLAGS: no-writes
-- ARGV[1] the key prefix (include/base.lua)
-- Returns {flat field/value list, result or false, blocked by, dependents}; an empty
-- field list if there is no record.

return {redis.call('HGETALL', K.task), redis.call('GET', K.result),
  redis.call('SMEMBERS', K['deps:blocked']), redis.call('SMEMBERS', K['deps:waiting'])}
