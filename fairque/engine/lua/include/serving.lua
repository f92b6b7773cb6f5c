-- The fair pop's serving (queue/pop.lua, design section 5), made once when the library
-- loads: a pop sets the state below, then offers lanes, serves them and writes back. A
-- script's own local functions are made again at every call (a closure and its upvalues
-- each time); these are not.
--@include maintenance

-- What the pop was asked (pop_arguments), one table: a function may reach at most 60
-- variables outside it, and every call's start resets each of these. `worker`, `wanted`
-- (how many tasks), `lease_seconds` (nil: each task's timeout), `names` and `names_count`
-- (the task names it serves; none: any), `assigned` and `steal` (the tenants it is
-- assigned and may steal from; nil: neither), and `now`, the time of the call (nil
-- until the pop needs it: see pop_clock).
local asked = nil
-- The lanes the pop looked at (their lane_state), in order.
local pop_lanes = nil
-- The tenants the pop looked at, in order, and each one's seat: its `shares` (read once:
-- a call of shares_of costs ~0.3k instructions), its `weight`, what is left of its turn
-- (`turn_left`: a tenant of weight w takes w tasks in a row before moving to the back,
-- weighted round robin), how many more it may start in this call (`room`, its shares'
-- room; false until read), the lease `tokens` of its starts, and the tick of its last
-- serve in this call if its turn ended (`served_tick`, or false).
-- One record per tenant: a table per field cost a pop a table and an insert in each.
local tenants_touched, seats = nil, nil
-- The reply, to which the leases made add their rows; how many tasks they are, and
-- their entries in K.leases (deadline, id...), written once at the end (write_leases).
local leased, taken, lease_entries = nil, 0, nil
-- The queues of each levels mask (at most 64 values), made once for the library.
local MASK_LEVELS = {}

-- The time of the pop, read from the server the first time it is needed: a pop that
-- finds nothing due and no tenant to serve (an idle worker's) makes no TIME call, which
-- cost it ~10k instructions.
local function pop_clock()
  if asked.now == nil then asked.now = clock_now() end
  return asked.now
end

-- `candidates` that are in `ring`, least recently served first, and the first one's score.
local function in_ring_order(ring, candidates)
  local fresh, skip = {}, {}
  for _, tenant in ipairs(candidates) do
    if not skip[tenant] then fresh[#fresh + 1] = tenant; skip[tenant] = true end
  end
  if #fresh == 0 then return {} end
  local scores = redis.call('ZMSCORE', ring, unpack(fresh))
  local present = {}
  for i, tenant in ipairs(fresh) do
    if scores[i] then present[#present + 1] = {tonumber(scores[i]), tenant} end
  end
  table.sort(present, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
  local ordered = {}
  for i, entry in ipairs(present) do ordered[i] = entry[2] end
  return ordered, present[1] and present[1][1]
end

-- Task name `name` goes to sleep: its rate window lets no task start until `opens`, when
-- wake_sleepers (ready.lua) wakes its workers.
local function name_sleeps(name, opens)
  redis.call('ZADD', K.sleeping, opens, NAME_SLEEPER .. name)
  note_due(opens, asked.now)
end

-- A lane_state: the lane, its ring's key, what it offers (below), whether its ring was
-- empty, is a spare lane (no live worker serves it), keeps tenants after this pop; its
-- name's limits (false: none), the starts they allow in this call (0: they hold it), and
-- its starts' lease tokens; and once served, its ready key, the tenants it looked at,
-- and per tenant its backlog there: {remaining = ready tasks left, before = ready tasks
-- before the pop, mask = levels mask, started = tasks started}.
-- What a lane offers this pop: its groups of tenants (assigned tenants first, then steal
-- targets (work stealing, seed 001); with neither, the head of its ring: `wanted` serves
-- never reach past its first `wanted`), and where the first one stands: its ring score,
-- or the tenant itself, whose score offering() reads if lanes are to be ordered; or false.
local function offer(lane)
  local ring = lane_key(lane, 'ring')
  -- Every field in the constructor: the table is made at its size once.
  local lane_state = {lane = lane, ring = ring, groups = false, first = false, empty = false,
    spare = false, kept = false, limits = false, room = false,
    lane_tokens = false, ready = false, backlogs = false, touched = false}
  pop_lanes[#pop_lanes + 1] = lane_state
  if asked.assigned == nil then
    local head = redis.call('ZRANGE', ring, 0, asked.wanted - 1)
    -- Where the lane's first tenant stands is read only when lanes are to be ordered.
    lane_state.groups, lane_state.first = {head}, #head > 0 and head[1]
    lane_state.empty = #head == 0
  else
    local mine, first = in_ring_order(ring, asked.assigned)
    local stolen, first_stolen = in_ring_order(ring, asked.steal)
    lane_state.groups, lane_state.first = {mine, stolen}, first or first_stolen or false
  end
  if lane_state.first then settings_held() end
  local limits = lane_state.first and limits_of(lane)
  if limits then -- its name's limits: how many it may start now
    local room, opens = name_room(lane, limits, pop_clock())
    lane_state.limits, lane_state.room, lane_state.lane_tokens = limits, room, {}
    if room == 0 then
      lane_state.first = false
      if opens then name_sleeps(lane, opens) end
    end
  end
  return lane_state
end

-- The lanes of `lanes` that offer tenants, the one whose first was served longest ago first.
local function offering(lanes)
  local open = {}
  for _, lane in ipairs(lanes) do
    local lane_state = offer(lane)
    if lane_state.first then open[#open + 1] = lane_state end
  end
  if #open > 1 then
    for _, lane_state in ipairs(open) do
      if type(lane_state.first) == 'string' then -- a tenant: its score
        lane_state.first = tonumber(redis.call('ZSCORE', lane_state.ring, lane_state.first))
      end
    end
    table.sort(open, function(a, b) return a.first < b.first end)
  end
  return open
end

-- A worker that names task names, still short: the lanes no live worker serves.
local function spare_lanes()
  local mine = {}
  for _, name in ipairs(asked.names) do mine[name] = true end
  local others = {}
  local lanes = redis.call('SMEMBERS', K.lanes)
  -- No lane holds ready tasks: the token of pops that name no names goes too.
  if #lanes == 0 then redis.call('DEL', K['wakeups:any']) end
  for _, lane in ipairs(lanes) do
    if not mine[lane] then others[#others + 1] = lane end
  end
  if #others == 0 then return {} end
  local serving_workers = redis.call('HMGET', K['workers:functions'], unpack(others))
  local unserved = {}
  for i, lane in ipairs(others) do
    if (tonumber(serving_workers[i]) or 0) <= 0 then unserved[#unserved + 1] = lane end
  end
  local open = offering(unserved)
  for _, lane_state in ipairs(open) do lane_state.spare = true end
  return open
end

-- The wake-up tokens follow the rings: a pop that names names keeps (or gives) the tokens
-- of their lanes while a tenant may be served there, so the next waiting worker wakes,
-- and takes them away once none may; a pop that names none does so for `wakeups:any`.
local function keep_tokens()
  local any = false
  for _, lane_state in ipairs(pop_lanes) do
    local open = lane_state.room ~= 0 and (lane_state.kept
      or not lane_state.empty and redis.call('EXISTS', lane_state.ring) == 1)
    any = any or open
    if asked.names_count > 0 and not lane_state.spare then
      if open then
        signal_ready(lane_key(lane_state.lane, 'wakeups'))
      else
        redis.call('DEL', lane_key(lane_state.lane, 'wakeups'))
      end
    end
  end
  if asked.names_count == 0 then
    if any then signal_ready(K['wakeups:any']) else redis.call('DEL', K['wakeups:any']) end
  end
end

local function drop_level(backlog, priority)
  backlog.mask = bit.band(backlog.mask, bit.bnot(level_bit(priority)))
end

-- The queues a levels mask names, the critical list first, then normal priorities from
-- 5 down to 1: made once per mask value (there are at most 64), not once per task taken.
local function levels_of(m)
  local levels = MASK_LEVELS[m]
  if levels == nil then
    levels = {}
    for _, priority in ipairs({CRITICAL, 5, 4, 3, 2, 1}) do
      if bit.band(m, level_bit(priority)) ~= 0 then levels[#levels + 1] = priority end
    end
    MASK_LEVELS[m] = levels
  end
  return levels
end

-- Removes and returns the next task id of `tenant` in `lane`: the critical head (FIFO),
-- else the normal head with the highest urgency (p / 5) * (now - ready time); ties go to
-- the higher priority, then to the older task. Only queues in its backlog's mask are asked.
local function take_task(lane, tenant, backlog)
  local levels = levels_of(backlog.mask)
  if levels[1] == CRITICAL then
    local id = redis.call('LPOP', critical_key(tenant, lane))
    if id then return id end
    drop_level(backlog, CRITICAL)
    levels = levels_of(backlog.mask)
  end
  if #levels == 1 then
    local popped = redis.call('ZPOPMIN', normal_key(tenant, levels[1], lane))
    if popped[1] then return popped[1] end
    drop_level(backlog, levels[1])
    return nil
  end
  local best_id, best_priority, best_urgency = nil, nil, nil
  for _, priority in ipairs(levels) do
    local head = redis.call('ZRANGE', normal_key(tenant, priority, lane), 0, 0, 'WITHSCORES')
    if head[1] then
      local waited = math.max(0, asked.now - tonumber(head[2]))
      local urgency = priority / 5 * waited
      if best_urgency == nil or urgency > best_urgency then
        best_id, best_priority, best_urgency = head[1], priority, urgency
      end
    else
      drop_level(backlog, priority)
    end
  end
  if best_id then redis.call('ZREM', normal_key(tenant, best_priority, lane), best_id) end
  return best_id
end

-- Leases task `id` of `tenant` from lane `lane_state`; returns its lease token.
local function lease(id, tenant, lane_state)
  local key = task_key(id)
  local f = redis.call('HMGET', key, 'priority', 'name', 'payload', 'attempts', 'timeout',
    'max_retries', 'created_at', 'start_time', 'prev_start_time', 'headers')
  -- The lease the worker asked for, else its name's (queue/limits.lua), else the timeout.
  local defaults = defaults_of(lane_state.lane)
  local name_lease = defaults and defaults.lease or 0
  local seconds = asked.lease_seconds or (name_lease > 0 and name_lease / MICROS) or tonumber(f[5])
  local deadline = asked.now + math.floor(seconds * MICROS)
  local token = next_tick(asked.now)
  lease_entries[#lease_entries + 1], lease_entries[#lease_entries + 2] = deadline, id
  note_due(deadline, asked.now)
  redis.call('HSET', key, 'state', 'started', 'leased_at', asked.now, 'lease_deadline', deadline,
    'lease_token', token, 'worker_id', asked.worker)
  local row = #leased + 1 -- LEASED_ROW's fields, in order
  leased[row + LEASED_ROW.task_id], leased[row + LEASED_ROW.user_id] = id, tenant
  leased[row + LEASED_ROW.priority], leased[row + LEASED_ROW.name] = f[1], f[2] or ''
  leased[row + LEASED_ROW.payload], leased[row + LEASED_ROW.attempts] = f[3], f[4] or 0
  leased[row + LEASED_ROW.lease_deadline], leased[row + LEASED_ROW.lease_token] = deadline, token
  leased[row + LEASED_ROW.timeout], leased[row + LEASED_ROW.max_retries] = f[5], f[6]
  leased[row + LEASED_ROW.created_at], leased[row + LEASED_ROW.start_time] = f[7], f[8]
  leased[row + LEASED_ROW.prev_start_time], leased[row + LEASED_ROW.headers] = f[9] or '', f[10] or ''
  -- A spare lane's task goes back (queue/hand_over): the worker cannot run it, so it is
  -- no start, neither in the counters nor in the fairness figures.
  if not lane_state.spare then
    count('started')
    note_start(tenant, asked.now - (tonumber(f[8]) or asked.now))
  end
  taken = taken + 1
  if lane_state.limits then
    lane_state.room = lane_state.room - 1
    lane_state.lane_tokens[#lane_state.lane_tokens + 1] = token
  end
  return token
end

-- Reads what the tenants of `group` may take in the lane: their ready entries there,
-- shares and turns. Returns those that may start a task now, in ring order.
local function open_group(lane_state, group)
  local active = {}
  if #group == 0 then return active end
  if not lane_state.touched then
    lane_state.ready = lane_key(lane_state.lane, 'ready')
    lane_state.backlogs, lane_state.touched = {}, {}
  end
  local entries = redis.call('ZMSCORE', lane_state.ready, unpack(group))
  if #tenants_touched == 0 then
    read_shares(group)
  else -- a later group or lane: only those not read yet
    local fresh = {}
    for _, tenant in ipairs(group) do
      if not seats[tenant] then fresh[#fresh + 1] = tenant end
    end
    read_shares(fresh)
  end
  local backlogs, touched = lane_state.backlogs, lane_state.touched
  for i, tenant in ipairs(group) do
    local remaining, mask = split_ready(entries[i])
    backlogs[tenant] = {remaining = remaining, before = remaining, mask = mask, started = 0}
    touched[#touched + 1] = tenant
    local seat = seats[tenant]
    if seat == nil then
      local s = shares_of(tenant)
      local w = s and s.weight or 1
      seat = {shares = s, weight = w, turn_left = w, room = false, tokens = {}, served_tick = false}
      if w > 1 then seat.turn_left = tonumber(redis.call('HGET', K.turns, tenant)) or w end
      seats[tenant] = seat
      tenants_touched[#tenants_touched + 1] = tenant
    end
    if not seat.room and remaining > 0 then
      seat.room = start_room(tenant, seat.shares, asked.now)
    end
    if remaining > 0 and seat.room > 0 then active[#active + 1] = tenant end
  end
  return active
end

-- Serves a lane: round robin over its groups' tenants, while the pop wants more and the
-- lane's name limits (if any) allow more.
local function serve(lane_state)
  for _, group in ipairs(lane_state.groups) do
    if taken >= asked.wanted or lane_state.room == 0 then return end
    local active = open_group(lane_state, group)
    local lane, backlogs = lane_state.lane, lane_state.backlogs
    while taken < asked.wanted and #active > 0 and lane_state.room ~= 0 do
      local still = {}
      for _, tenant in ipairs(active) do
        if taken >= asked.wanted or lane_state.room == 0 then break end
        local backlog, seat = backlogs[tenant], seats[tenant]
        repeat
          local id = take_task(lane, tenant, backlog)
          if id then
            local started = seat.tokens
            started[#started + 1] = lease(id, tenant, lane_state)
            backlog.remaining = backlog.remaining - 1
            backlog.started = backlog.started + 1
            seat.room = seat.room - 1
            seat.turn_left = seat.turn_left - 1
          else
            backlog.remaining = 0  -- a count without queued ids: repair the invariant
          end
        until taken >= asked.wanted or backlog.remaining == 0 or seat.room == 0
          or seat.turn_left == 0 or lane_state.room == 0
        if seat.turn_left == 0 then -- its turn is over: to the back of the rings
          seat.served_tick = next_tick(asked.now)
          seat.turn_left = seat.weight
        end
        if backlog.remaining > 0 and seat.room > 0 then still[#still + 1] = tenant end
      end
      active = still
    end
  end
end

-- The lanes where this pop left `tenant` ready tasks, and how many it left there.
local function lanes_seen(tenant)
  local lanes, left = {}, 0
  for _, lane_state in ipairs(pop_lanes) do
    local backlog = lane_state.backlogs and lane_state.backlogs[tenant]
    if backlog and backlog.remaining > 0 then
      lanes[#lanes + 1], left = lane_state.lane, left + backlog.remaining
    end
  end
  return lanes, left
end


-- Reads the pop's arguments into `asked`, made at `now`: queue/pop.lua's ARGV[2..], here
-- from ARGV[first] on.
local NO_NAMES = {} -- never written to
local function pop_arguments(now, first)
  local names_count = tonumber(ARGV[first + 3])
  asked = {worker = ARGV[first], wanted = tonumber(ARGV[first + 1]),
    lease_seconds = tonumber(ARGV[first + 2]),
    names = names_count > 0 and {unpack(ARGV, first + 4, first + 3 + names_count)} or NO_NAMES,
    names_count = names_count, assigned = nil, steal = nil, now = now}
  local at = first + 4 + names_count
  if ARGV[at] == '1' then
    local n = tonumber(ARGV[at + 1])
    asked.assigned = {unpack(ARGV, at + 2, at + 1 + n)}
    local m = tonumber(ARGV[at + 2 + n])
    asked.steal = {unpack(ARGV, at + 3 + n, at + 2 + n + m)}
  end
end

-- Serves the lanes `serving`, then, for a pop still short that names names, `spare` (or
-- the spare lanes, read now), adding the leases' rows to `reply`.
local function serve_lanes(serving, spare, reply)
  tenants_touched, seats = {}, {}
  leased, taken, lease_entries = reply, 0, {}
  for _, lane_state in ipairs(serving) do
    if taken >= asked.wanted then break end
    serve(lane_state)
  end
  if taken < asked.wanted and asked.names_count > 0 then
    for _, lane_state in ipairs(spare or spare_lanes()) do
      if taken >= asked.wanted then break end
      serve(lane_state)
    end
  end
end

-- Write back, per lane: ready entries, and tenants left without ready tasks there leave
-- it; per tenant: starts to K.running (and the rate logs), ready counts, ring positions.
-- Served tenants whose turn ended move to the back of their rings in the order of their
-- last serve; one inside its turn keeps its place; one its shares now hold leaves them.
local function write_back()
  local left_ready = 0
  for _, lane_state in ipairs(pop_lanes) do
    local touched = lane_state.touched
    if touched and #touched > 0 then
      if #touched >= WIDE then unpack_tenant_keys(lane_state.lane) end
      local entries_left, gone = {}, {}
      for _, tenant in ipairs(touched) do
        local backlog = lane_state.backlogs[tenant]
        local remaining = backlog.remaining
        left_ready = left_ready + backlog.before - math.max(remaining, 0)
        if remaining <= 0 then
          gone[#gone + 1] = tenant
        else
          if (seats[tenant].room or 1) > 0 then lane_state.kept = true end -- stays in the ring
          if backlog.started > 0 then
            entries_left[#entries_left + 1] = remaining * LEVELS + backlog.mask
            entries_left[#entries_left + 1] = tenant
          end
        end
      end
      if #entries_left > 0 then call_chunked('ZADD', lane_state.ready, entries_left) end
      for _, tenant in ipairs(gone) do leave_lane(tenant, lane_state.lane) end
    end
    local limits = lane_state.limits
    if limits and #lane_state.lane_tokens > 0 then -- starts under its name's limits
      local name, name_tokens = lane_state.lane, lane_state.lane_tokens
      redis.call('HINCRBY', K['names:running'], name, #name_tokens)
      record_starts(name_starts_key(name), limits, asked.now, name_tokens)
      if lane_state.room == 0 then -- held now: asleep until its window opens, if that holds it
        local _, opens = name_room(name, limits, asked.now)
        if opens then name_sleeps(name, opens) end
      end
    end
  end
  if left_ready > 0 then redis.call('DECRBY', K['ready:total'], left_ready) end

  local moves, moved_lanes = {}, {}
  for _, tenant in ipairs(tenants_touched) do
    local seat = seats[tenant]
    local started = #seat.tokens
    local total = nil
    if started > 0 then
      redis.call('HINCRBY', K.running, tenant, started)
      if seat.shares then
        record_starts(tenant_starts_key(tenant), seat.shares, asked.now, seat.tokens)
      end
      total = ready_taken(tenant, started)
    end
    if seat.room and seat.room <= 0 then
      place(tenant, asked.now) -- held by its shares: out of every ring
    elseif seat.served_tick then
      -- Its lanes: those this pop saw it in, unless its total says it has others.
      local lanes, left = lanes_seen(tenant)
      if total == nil or total > left then lanes = redis.call('SMEMBERS', lanes_of_key(tenant)) end
      for _, lane in ipairs(lanes) do
        local lane_moves = moves[lane]
        if lane_moves == nil then
          lane_moves = {}
          moves[lane], moved_lanes[#moved_lanes + 1] = lane_moves, lane
        end
        lane_moves[#lane_moves + 1] = seat.served_tick
        lane_moves[#lane_moves + 1] = tenant
      end
    end
    if seat.weight > 1 then
      local any_ready = redis.call('EXISTS', lanes_of_key(tenant)) == 1
      if any_ready and seat.turn_left < seat.weight and (seat.room or 1) > 0 then
        redis.call('HSET', K.turns, tenant, seat.turn_left)
      else
        redis.call('HDEL', K.turns, tenant)
      end
    end
  end
  for _, lane in ipairs(moved_lanes) do
    redis.call('ZADD', lane_key(lane, 'ring'), 'XX', unpack(moves[lane]))
  end
end

-- The leases get a member for each task taken, which finish and the reaper take off one
-- by one: in a listpack (under 128 members) each of those writes scans it, so a pop of
-- many makes it a skiplist before adding them (~90 bytes more per lease in flight).
local MANY_LEASES = 16
local function write_leases()
  if taken >= MANY_LEASES then
    zadd_into_skiplist(K.leases, lease_entries)
  elseif taken > 0 then
    redis.call('ZADD', K.leases, unpack(lease_entries))
  end
end

-- A pop of one task (a worker at concurrency 1 makes one per task) whose first lane's
-- first tenant has ready tasks there and no shares, in a lane without limits: the
-- common case, served and written back without the tables of serve() and write_back()
-- (a record per lane, tenant and group, the rounds' lists), which cost such a pop more
-- than its commands did. It takes what serve() would (that tenant's next task, as the
-- only one wanted) and writes what write_back() would. Returns false, having written
-- nothing, when the case is not this one (the caller then serves as for any count).
local function pop_one(lane_state)
  if lane_state.limits or asked.assigned ~= nil then return false end
  local tenant = lane_state.groups[1][1]
  if shares_of(tenant) then return false end
  local lane = lane_state.lane
  local ready = lane_key(lane, 'ready')
  local remaining, mask = split_ready(redis.call('ZSCORE', ready, tenant))
  if remaining <= 0 then return false end
  local backlog = {mask = mask}
  local id = take_task(lane, tenant, backlog)
  if id == nil then return false end -- a count without queued ids: serve() repairs it
  lease(id, tenant, lane_state)
  -- Its turn (weight 1) is over: to the back of the rings of its lanes. Those are this
  -- one, unless its count over all lanes says it has ready tasks elsewhere.
  local served_tick = next_tick(asked.now)
  remaining = remaining - 1
  if remaining > 0 then
    redis.call('ZADD', ready, remaining * LEVELS + backlog.mask, tenant)
    lane_state.kept = true
  end
  redis.call('DECRBY', K['ready:total'], 1)
  redis.call('HINCRBY', K.running, tenant, 1)
  local total = ready_taken(tenant, 1)
  if remaining <= 0 then leave_lane(tenant, lane) end
  if total > remaining then
    for _, other in ipairs(redis.call('SMEMBERS', lanes_of_key(tenant))) do
      redis.call('ZADD', lane_key(other, 'ring'), 'XX', served_tick, tenant)
    end
  elseif remaining > 0 then
    redis.call('ZADD', lane_state.ring, 'XX', served_tick, tenant)
  end
  return true
end

-- The pop of queue/pop.lua, its arguments from ARGV[first] on (that script's ARGV[2..]),
-- at `now` (nil: pop_clock reads it when needed): adds its reply's rows to `reply` (what
-- the call replies before them: copying the rows after it cost a worker's cycle of pops
-- of 10 ~6k server instructions a task) and returns it and the time of the pop (nil if
-- it needed none), leaving the writes to the caller's flush(). What the call did before
-- (a finish) is applied first, by the housekeeping's flushes, so the pop sees the slots
-- and limits it freed. `quiet_mark`: maintain()'s.
local function pop_tasks(now, first, reply, quiet_mark)
  pop_arguments(now, first)
  now = maintain(now, quiet_mark)
  asked.now = now
  flush_ready(now)
  flush_running(now)

  -- No lane holds a ready task (an idle worker's pop after its wait, most often): no
  -- tenant to look at, and no wake-up token may stay.
  if redis.call('EXISTS', K.lanes) == 0 then
    local tokens = {K['wakeups:any']}
    for _, name in ipairs(asked.names) do tokens[#tokens + 1] = lane_key(name, 'wakeups') end
    redis.call('DEL', unpack(tokens))
    return reply, asked.now
  end
  pop_lanes = {}
  local serving = offering(asked.names_count > 0 and asked.names or redis.call('SMEMBERS', K.lanes))

  -- No tenant to serve (an idle worker's pop): it ends here, before the tables serving needs.
  local spare = nil
  if #serving == 0 and asked.names_count > 0 then spare = spare_lanes() end
  if #serving == 0 and (spare == nil or #spare == 0) then
    keep_tokens()
    return reply, asked.now
  end

  pop_clock()
  if asked.wanted == 1 then
    leased, taken, lease_entries = reply, 0, {}
    if not pop_one(serving[1] or spare[1]) then
      serve_lanes(serving, spare, reply)
      write_back()
    end
  else
    serve_lanes(serving, spare, reply)
    write_back()
  end
  wake_workers()
  keep_tokens()
  write_leases()
  return leased, asked.now
end
