-- Who holds a started task: its lease token, checked by the calls a running task makes.
--@include base

-- True when `token` still holds the lease of task `id`.
local function holds_lease(id, token)
  local f = redis.call('HMGET', task_key(id), 'state', 'lease_token')
  return f[1] == 'started' and f[2] == token
end
