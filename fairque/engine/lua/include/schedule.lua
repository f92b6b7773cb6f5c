-- The scheduler's records (design section 8): K.schedules (id -> definition),
-- K['schedules:next'] (active ids by next run, us), K['schedules:status'] (id ->
-- MessagePack map: v (version), state, runs, skipped, failures, last_run,
-- last_submitted_at, last_task_id, last_error, pending_run).

local function read_status(id)
  local packed = redis.call('HGET', K['schedules:status'], id)
  if not packed then return nil end
  return cmsgpack.unpack(packed)
end

local function write_status(id, status)
  redis.call('HSET', K['schedules:status'], id, cmsgpack.pack(status))
end
