-- storage/done: tasks are done and removed (seed 004 DoneTask), whatever their state;
-- ids that are not storage tasks (or are gone already) are left alone.
-- KEYS: leases stats clock storage:queues stats:tenants
-- ARGV[1] the key prefix (include/base.lua)
-- ARGV[2..] the task ids
-- Returns how many tasks were removed.
--@include storage
--@include figures

local now = clock_now()
local unleased, removed, held = {}, 0, {}
for i = 2, #ARGV do
  local id = ARGV[i]
  local f = redis.call('HMGET', task_key(id), 'queue', 'state', 'kind')
  if f[3] == 'storage' then
    if f[2] == 'started' then
      unleased[#unleased + 1] = id
    else
      redis.call('ZREM', storage_queue_key(f[1]), id)
    end
    redis.call('DEL', task_key(id))
    held[f[1]] = (held[f[1]] or 0) - 1
    count('finished')
    removed = removed + 1
  end
end
if #unleased > 0 then call_chunked('ZREM', K.leases, unleased) end
for queue, n in pairs(held) do count_held(queue, n) end
return flush_counts(now, removed)
