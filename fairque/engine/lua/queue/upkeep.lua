-- queue/upkeep: what keeps a worker in good standing, in one call: its registration kept
-- (include/workers.lua: only its expiry moves, unless it was not registered or asks for
-- its record to be written), the namespace's maintenance round run if one is due
-- (include/rounds.lua, as namespace/reap.lua; or, for a caller that gives no interval,
-- whether one is due), and what the worker needs to wait: when work comes due without a
-- push, and whether a tenant may be served now in a lane it serves (a lane's wake-up
-- token is there, ready.lua). A busy worker makes this call once a maintenance interval,
-- and an idle one that waits on a wake channel once a wait (one that waits in its pop
-- makes queue/idle_pop instead). Workers whose registration expired are dropped by the
-- round, and when the registry is read.
-- KEYS: workers workers:expiry workers:functions scheduled leases stats clock state:deferred deps:cursor state:finished state:failed state:canceled strict:partitions constraints maintenance settings running shares sleeping turns ready:total stats:tenants lanes ready:tenants wakeups:any wakeups:until names:running maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the worker id
-- ARGV[3] its record (MessagePack, as queue/workers' beat)
-- ARGV[4] how long its registration lives (us)
-- ARGV[5] 1 to write the record even if the worker is registered, else 0
-- ARGV[6] how long the worker waits next at most, if nothing comes due sooner (us):
--   writers that add work due before its wait ends wake it (ready.lua's due_in_lane);
--   '' for a busy worker, which does not wait
-- ARGV[7] the interval between maintenance rounds (us): a round due is run; '' runs none
-- ARGV[8..] the task names the worker serves (none: any), whose lanes' tokens it reads
-- Returns {1 if the worker was registered before, us until work comes due without a push
-- (-1: nothing will), 1 if a tenant may be served in its lanes, 1 if a round is due: at
-- once after the one this call ran, which hit its bound, or, with no interval, now}.
--@include due_times
--@include rounds

local now = clock_now()
local known = beat(ARGV[2], ARGV[3], tonumber(ARGV[4]), now, ARGV[5] == '1')
if type(known) == 'table' then return known end
local interval = tonumber(ARGV[7])
local longest = tonumber(ARGV[6])
local round_due
if interval then
  -- A worker about to wait: light unless the last full round is ten waits old (rounds.lua).
  round_due = maintenance_round(now, nil, interval, nil, longest and 10 * longest)[6] == 1
else
  round_due = now >= tonumber(redis.call('HGET', K.maintenance, 'next_at') or 0)
end
local due = earliest_due(true)
if longest then note_wait(now, due, longest) end
local ready
if #ARGV < 8 then
  ready = redis.call('EXISTS', K['wakeups:any'])
else
  local tokens = {}
  for i = 8, #ARGV do tokens[#tokens + 1] = lane_key(ARGV[i], 'wakeups') end
  ready = redis.call('EXISTS', unpack(tokens))
end
return flush(now, {known and 1 or 0, due == nil and -1 or math.max(0, due - now),
  ready > 0 and 1 or 0, round_due and 1 or 0})
