-- pop: lease up to `count` ready tasks by the fair policy (design section 5).
--
-- A pop reaches the lanes (include/base.lua) of the task names the worker serves, the
-- lane whose first tenant was served longest ago first; then, if it is still short, the
-- lanes no live worker serves (unnamed tasks, or a name whose workers are gone), whose
-- tasks the worker hands over (queue/hand_over.lua) until they fail as unserved. A pop
-- that names no task names reaches every lane. In a lane, round robin is simulated inside
-- the call on the tenants it can reach (the first `count` of the ring, or the named
-- ones), then written back once: the result is the same as popping one task at a time.
-- A tenant's turn is its own across lanes: when it ends, the tenant goes to the back of
-- the ring of every lane where it has ready tasks.
-- KEYS: scheduled leases stats clock state:finished state:failed state:canceled strict:partitions constraints settings running shares sleeping turns ready:total ready:tenants lanes stats:tenants wakeups:any wakeups:until workers:functions names:running names:defaults maintenance:quiet
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2] the worker id
-- ARGV[3] count
-- ARGV[4] lease seconds ('' = each task's timeout)
-- ARGV[5..] the number of task names the worker serves (0: it takes any) and those; then
--   1 when the worker names tenants, else 0 and nothing follows; then the number of
--   assigned tenants, those, the number of steal targets, those
-- Returns, per leased task: id, tenant, priority, name, payload, attempts, lease deadline
-- (us), lease token, timeout, max_retries, created_at, start_time, prev_start_time,
-- headers ('' for none, else MessagePack).
--@include serving

local leased, now = pop_tasks(nil, 2, {})
return flush(now, leased)
