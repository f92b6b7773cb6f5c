-- scheduler/claim: one cycle's look at the schedules, and the instance's heartbeat. Takes
-- seed 002's lock (SET NX PX with the instance's owner token) on each due schedule that
-- no other instance holds, at most ARGV[5] of them, and reads each one under its lock:
-- one round trip for a whole batch. A schedule another instance holds is passed over
-- (counted as busy) so that instances claim different schedules; at most
-- SCAN_FACTOR * ARGV[5] due schedules are looked at per call. The locks
-- scheduler:lock:<id> are made from the ids found (lock_key), as task keys are.
-- KEYS: schedules schedules:next schedules:status scheduler:instances scheduler:instances:expiry
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the instance id
-- ARGV[3] its record (MessagePack map)
-- ARGV[4] the record's time to live (us)
-- ARGV[5] at most this many schedules claimed
-- ARGV[6] the lock token
-- ARGV[7] the lock lifetime (ms)
-- Returns {server time, flat list of id, next run, definition, status per claimed
-- schedule, the number of due schedules found locked, the earliest next run of any
-- active schedule (or -1)}.
--@include scheduler_instances
--@include schedule_lock

local SCAN_FACTOR = 10
local now = clock_now()
drop_expired_instances(now)
record_instance(ARGV[2], ARGV[3], now, tonumber(ARGV[4]))
local limit, token, lifetime = tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local claimed, taken, busy, offset = {}, 0, 0, 0
while taken < limit and offset < SCAN_FACTOR * limit do
  local due = redis.call('ZRANGEBYSCORE', K['schedules:next'], '-inf', now, 'WITHSCORES',
    'LIMIT', offset, limit)
  for i = 1, #due, 2 do
    local id = due[i]
    if redis.call('SET', lock_key(id), token, 'NX', 'PX', lifetime) then
      claimed[#claimed + 1] = id
      claimed[#claimed + 1] = due[i + 1]
      claimed[#claimed + 1] = redis.call('HGET', K.schedules, id)
      claimed[#claimed + 1] = redis.call('HGET', K['schedules:status'], id)
      taken = taken + 1
      if taken == limit then break end
    else
      busy = busy + 1
    end
  end
  if #due < 2 * limit then break end -- no more due
  offset = offset + limit
end
local first = redis.call('ZRANGE', K['schedules:next'], 0, 0, 'WITHSCORES')
return {now, claimed, busy, first[2] and tonumber(first[2]) or -1}
