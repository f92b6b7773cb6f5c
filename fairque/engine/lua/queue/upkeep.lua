-- queue/upkeep: what keeps a worker in good standing, in one call: its registration kept
-- (include/workers.lua: only its expiry moves, unless it was not registered or asks for
-- its record to be written), whether the namespace's maintenance round is due (the
-- worker then runs it: namespace/reap.lua, include/rounds.lua), and what the worker needs
-- to wait: when work comes due without a push, and whether a tenant may be served now in
-- a lane it serves (a lane's wake-up token is there, ready.lua). An idle worker makes
-- this call once a wait, and a busy one once a maintenance interval: an idle worker costs
-- the server this call and one wait per poll interval (and a round when one is due).
-- Small on purpose: a script's every include adds to each of its calls' start. Workers
-- whose registration expired are dropped by the round, and when the registry is read.
-- KEYS: workers workers:expiry workers:functions scheduled leases sleeping maintenance wakeups:any wakeups:until
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the worker id
-- ARGV[3] its record (MessagePack, as queue/workers' beat)
-- ARGV[4] how long its registration lives (us)
-- ARGV[5] 1 to write the record even if the worker is registered, else 0
-- ARGV[6] how long the worker waits next at most, if nothing comes due sooner (us):
--   writers that add work due before its wait ends wake it (ready.lua's due_in_lane);
--   '' for a busy worker, which does not wait
-- ARGV[7..] the task names the worker serves (none: any), whose lanes' tokens it reads
-- Returns {1 if the worker was registered before, us until work comes due without a push
-- (-1: nothing will), 1 if a tenant may be served in its lanes, 1 if a round is due}.
--@include workers
--@include due_times

local now = clock_now()
local known = beat(ARGV[2], ARGV[3], tonumber(ARGV[4]), now, ARGV[5] == '1')
if type(known) == 'table' then return known end
local round_due = now >= tonumber(redis.call('HGET', K.maintenance, 'next_at') or 0)
local due = earliest_due(true)
local longest = tonumber(ARGV[6])
if longest then
  local wait_end = now + (due == nil and longest or math.min(longest, math.max(0, due - now)))
  if wait_end > tonumber(redis.call('GET', K['wakeups:until']) or 0) then
    -- No expiry: a time gone by wakes no one, and a key with one costs the server's
    -- expiry cycle work ten times a second while it lives.
    redis.call('SET', K['wakeups:until'], int(wait_end))
  end
end
local ready
if #ARGV < 7 then
  ready = redis.call('EXISTS', K['wakeups:any'])
else
  local tokens = {}
  for i = 7, #ARGV do tokens[#tokens + 1] = lane_key(ARGV[i], 'wakeups') end
  ready = redis.call('EXISTS', unpack(tokens))
end
return {known and 1 or 0, due == nil and -1 or math.max(0, due - now), ready > 0 and 1 or 0,
  round_due and 1 or 0}
