-- When work comes due without a push, for a worker to wait until then.
--@include base
-- When work next becomes ready without a push (us, server clock): the earliest head of
-- K.scheduled (a delay, a retry backoff), of K.leases when `with_leases` (a worker that
-- died), and of K.sleeping (a rate window opening); nil if nothing will.
local function earliest_due(with_leases)
  local earliest = nil
  for _, key in ipairs(with_leases and {K.scheduled, K.leases, K.sleeping}
      or {K.scheduled, K.sleeping}) do
    local head = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    if head[1] and (earliest == nil or tonumber(head[2]) < earliest) then
      earliest = tonumber(head[2])
    end
  end
  return earliest
end

-- Notes that a worker waits from `now` until work comes due (`due`, nil if nothing will),
-- `longest` us at most: writers that add work due before the latest such end wake the
-- lane's workers (ready.lua's due_in_lane).
local function note_wait(now, due, longest)
  local wait_end = now + (due == nil and longest or math.min(longest, math.max(0, due - now)))
  if wait_end > tonumber(redis.call('GET', K['wakeups:until']) or 0) then
    -- No expiry: a time gone by wakes no one, and a key with one costs the server's
    -- expiry cycle work ten times a second while it lives.
    redis.call('SET', K['wakeups:until'], int(wait_end))
  end
end
