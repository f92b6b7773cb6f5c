-- idle_pop: the call behind an idle worker's wait for work (its BLPOP, in one pipeline):
-- a pop (queue/pop.lua) that, when it leases nothing, is also the worker's upkeep for its
-- next wait (queue/upkeep.lua: its registration kept, when work comes due) and runs the
-- namespace's maintenance round if one is due (include/rounds.lua). So an idle worker
-- makes one script call a wait, where it made three (its upkeep, the round and the pop:
-- their fixed costs, the clock and the heads of the same sorted sets read again).
-- KEYS: scheduled leases stats clock state:deferred deps:cursor state:finished state:failed state:canceled strict:partitions constraints maintenance settings running shares sleeping turns ready:total ready:tenants lanes stats:tenants wakeups:any wakeups:until workers workers:expiry workers:functions names:running names:defaults maintenance:quiet
-- The upkeep only moves the registration's expiry: a worker that is not registered (it
-- left as it stopped, the wait's end racing its leaving, or expired) is not registered
-- again here, and one whose record changed makes a queue/upkeep call instead.
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] how long the worker's registration lives (us)
-- ARGV[3] how long the worker waits next at most, if nothing comes due sooner (us)
-- ARGV[4] the interval between maintenance rounds (us)
-- ARGV[5..] queue/pop's ARGV[2..]: the worker id, count, lease seconds, the task names and
--   the tenants
-- Returns {1 if nothing was leased (the upkeep's fields follow), 1 if the worker is
-- registered (its expiry moved), us until work comes due without a push (-1: nothing
-- will), 1 if another round is due at once (this one hit its bound)}, then queue/pop's
-- rows.
--@include serving
--@include due_times
--@include rounds

local leased, now = pop_tasks(nil, 5, {0, 0, -1, 0}, false)
if #leased > 4 then return flush(now, leased) end
now = now or clock_now() -- an empty pop reads the clock only when housekeeping is due
local registered = redis.call('ZADD', K['workers:expiry'], 'XX', 'CH', now + tonumber(ARGV[2]),
  ARGV[5])
-- The pop's housekeeping read the heads of leases, scheduled and sleeping at `now` (unless
-- the quiet mark spared it): the round and the due time need not read them again.
local heads_clear, earliest = maintained_heads()
-- Light unless the last full round is ten waits old (include/rounds.lua).
local round = maintenance_round(now, nil, tonumber(ARGV[4]), heads_clear, 10 * tonumber(ARGV[3]))
local due = earliest
if not heads_clear then due = earliest_due(true) end
note_wait(now, due, tonumber(ARGV[3]))
leased[1], leased[2], leased[4] = 1, registered, round[6]
if due ~= nil then leased[3] = math.max(0, due - now) end
return flush(now, leased)
