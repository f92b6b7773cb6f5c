-- When work comes due without a push, for a worker to wait until then.
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
