"""A lean layout measured beside fairque's: what a data format 3 could cost the server.

    uv run python bench/bench_lean_layout.py [--tenants 50] [--tasks 600] [--repeat 2]

Issue 48 asks a one-task push to cost the server <= 128k instructions and a worker at
concurrency 1 (one call that finishes a task and leases the next) <= 257k; format 2
costs ~188k and ~470k (``bench_instructions.py``). This counts, under callgrind on one
throwaway embedded Valkey, the same two operations in a sketch of another layout (a Lua
library of its own, not a queue: one task name, one priority (three variants add
priority levels), no shares, limits, groups or dependencies; a wake-up only as a tenant
joins the ring), beside fairque's own on the same server:

- a tenant's ready tasks are a list (FIFO by construction: a task needs no tick of its
  own, and a push takes the clock only when its tenant joins the ring);
- a task's fixed fields are one MessagePack field (``row``), written once, read once;
- every counter (pushed, started, finished, per tenant and in all), the ready counts
  (``ready:total``, ``ready:tenants``) and the fairness figures (starts and their waits)
  go to one record appended per call, ``log``, folded into their hashes and zsets when it
  reaches ``FOLD_BYTES`` (the fold's cost is in the counts): a reader adds what is
  still in the log, as ``fairness:<m>:pending`` is read today;
- the finish keeps the lease check, the state and time to live, the leases and the
  finished registry; the pop keeps the fair ring (a tenant back to the end after each
  task), the tick clock (never behind the server's, never stepping back), the lease and
  its deadline, the running counts.

Prints server instructions per task for each of ``--repeat`` runs: the sketch and
fairque, at concurrency 1 and finishing and leasing 10 a call; a job's life one job at a
time (a push whose tenant joins the ring, the worker's wait ending on its wake-up token
with the pop behind it, the finish whose pop finds nothing: the peers' life row, whose
target is <= 385k); and the sketch with each of :data:`VARIANTS` (one choice turned back
to format 2's, something it keeps dropped, or priority levels added, to cost it), life
included. Asserts that every task pushed was leased once and finished, by the counters a
reader would add up; never a queue's test.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import redis
from bench_instructions import cycles, one_per_call, task, warm_up
from callgrind import CountedServer

from fairque import FairQueue
from fairque.servers.embedded import free_port, valkey_binary

LEAN_LIBRARY = r"""#!lua name=lean
local FOLD_BYTES = 4096
local P = 'lean:{l}:'

-- Server time in us, never behind the last tick handed out (the clock is read only when
-- a tick is taken).
local function now_us()
  local t = redis.call('TIME')
  return t[1] * 1000000 + t[2]
end

-- Adds the log's records to the counters, ready counts and figures, then drops it. A
-- record is lines of "<kind> <tenant>[ <wait bucket>]": p pushed, f finished, s started.
local function fold()
  local log = redis.call('GET', P .. 'log')
  if not log then return end
  local by_kind = {p = {}, f = {}, s = {}}
  local buckets = {}
  for kind, tenant, bucket in string.gmatch(log, '(%a) ([^ \n]+) ?(%d*)\n') do
    local counts = by_kind[kind]
    counts[tenant] = (counts[tenant] or 0) + 1
    if bucket ~= '' then
      local key = tenant .. '|' .. bucket
      buckets[key] = (buckets[key] or 0) + 1
    end
  end
  local totals = {pushed = 0, finished = 0, started = 0}
  for kind, name in pairs({p = 'pushed', f = 'finished', s = 'started'}) do
    for tenant, n in pairs(by_kind[kind]) do
      redis.call('HINCRBY', P .. 'stats:tenants', name .. ':' .. tenant, n)
      totals[name] = totals[name] + n
    end
  end
  local ready = {}
  for tenant, n in pairs(by_kind.p) do ready[tenant] = n end
  for tenant, n in pairs(by_kind.s) do ready[tenant] = (ready[tenant] or 0) - n end
  for tenant, n in pairs(ready) do
    if n ~= 0 then redis.call('ZINCRBY', P .. 'ready:tenants', n, tenant) end
  end
  for key, n in pairs(buckets) do redis.call('HINCRBY', P .. 'fig:waits', key, n) end
  for name, n in pairs(totals) do
    if n > 0 then redis.call('HINCRBY', P .. 'stats', name, n) end
  end
  redis.call('INCRBY', P .. 'ready:total', totals.pushed - totals.started)
  redis.call('DEL', P .. 'log')
end

-- LOG false (a variant): the counters and ready counts written by each call, as format 2
-- does (the starts' figures stay a record, as they are in format 2).
local LOG = true
-- ROW (false: a variant): a task's fixed fields in one field, or each in its own as in
-- format 2.
local ROW = true
-- REGISTRY, RUNNING (false: variants that drop them, to cost them): the finished
-- registry (its count and listing) and the tenants' running counts (their limits).
local REGISTRY = true
local RUNNING = true
-- PRIORITIES (true: a variant): a tenant's ready tasks in a list per priority level, and
-- its ready entry (count * 64 + a bit per level holding tasks) in `ready`, which the pop
-- reads to find the highest level, as format 2's ready entries do.
local PRIORITIES = false
-- ORDERED (true: a variant): priorities kept instead in one zset per tenant, scored by
-- level then tick (so every push takes a tick), popped by ZPOPMIN: no ready entry.
local ORDERED = false
-- URGENCY (true: a variant, with ORDERED): the pop takes the task design.md section 5
-- asks for, the head of highest urgency (p / 5) * (now - ready tick) over the levels
-- holding tasks, not the highest level's: it reads the zset's first and last entries, and
-- when they are of two levels, the head of each level between (ZRANGE BYSCORE).
local URGENCY = false
local LEVEL = 3 -- the benches' tasks are all of the default priority
-- LANES (true: a variant): what format 2 does as a tenant joins or leaves a lane besides
-- its ring: the sets of a tenant's lanes and of the lanes with ready tasks (SADD as it
-- joins; SREM, and the lane's SREM once its ring is empty, as it leaves), and the shares'
-- HLEN that tells whether a joining tenant's shares must be read.
local LANES = false
local function count(name, tenant)
  redis.call('HINCRBY', P .. 'stats:tenants', name .. ':' .. tenant, 1)
  redis.call('HINCRBY', P .. 'stats:tenants', name, 1)
  redis.call('HINCRBY', P .. 'stats', name, 1)
  redis.call('HINCRBY', P .. 'fig:all', name, 1)
end

local function note(record)
  if not LOG then
    for kind, tenant, bucket in string.gmatch(record, '(%a) ([^ \n]+) ?(%d*)\n') do
      if kind == 'p' then
        count('pushed', tenant)
        redis.call('ZINCRBY', P .. 'ready:tenants', 1, tenant)
        redis.call('INCRBY', P .. 'ready:total', 1)
      elseif kind == 'f' then
        count('finished', tenant)
      else
        redis.call('HINCRBY', P .. 'stats', 'started', 1)
        redis.call('ZINCRBY', P .. 'ready:tenants', -1, tenant)
        redis.call('DECRBY', P .. 'ready:total', 1)
        record = 's ' .. tenant .. ' ' .. bucket .. '\n'
      end
    end
    if string.byte(record, 1) ~= 115 then return end -- 's': the starts' record is kept
  end
  if redis.call('APPEND', P .. 'log', record) >= FOLD_BYTES then fold() end
end

-- push(id, tenant, row): one task of the one task name.
redis.register_function('push', function(keys, args)
  local id, tenant, row = args[1], args[2], args[3]
  if #row > tonumber(redis.call('HGET', P .. 'settings', 'payload_limit') or 1048576) then
    return redis.error_reply('INVALID payload too large')
  end
  local now = now_us()
  local task = P .. 't:' .. id
  if redis.call('EXISTS', task, P .. 'names:defaults') > 0 then return 0 end -- (+ defaults)
  if ROW then
    redis.call('HSET', task, 'row', row, 'tenant', tenant, 'state', 'queued', 'ready_at', now)
  else
    redis.call('HSET', task, 'name', 'send_email', 'payload', row, 'priority', 3, 'timeout',
      300, 'max_retries', 3, 'created_at', now, 'tenant', tenant, 'state', 'queued',
      'ready_at', now, 'kind', 'fair')
  end
  local joins
  if ORDERED then
    local tick = tonumber(redis.call('GET', P .. 'clock') or '0')
    local next_tick = now > tick and now or tick + 1
    redis.call('INCRBY', P .. 'clock', next_tick - tick)
    local queue = P .. 'q:' .. tenant
    -- Higher levels first: (6 - level) above the tick. A real layout would count ticks
    -- from a recent epoch (2^47 us is 4.5 years), so that the score stays exact below
    -- 2^53; the cost is the same.
    redis.call('ZADD', queue, (6 - LEVEL) * 2 ^ 51 + next_tick % 2 ^ 51, id)
    joins = redis.call('ZCARD', queue) == 1
  elseif PRIORITIES then
    local bit = 2 ^ LEVEL
    local added = redis.call('RPUSH', P .. 'q:' .. tenant .. ':' .. LEVEL, id) == 1 and bit or 0
    joins = tonumber(redis.call('ZINCRBY', P .. 'ready', 64 + added, tenant)) < 128
  else
    joins = redis.call('RPUSH', P .. 'q:' .. tenant, id) == 1
  end
  if joins then -- the tenant joins the ring
    local tick = tonumber(redis.call('GET', P .. 'clock') or '0')
    local next_tick = now > tick and now or tick + 1
    redis.call('ZADD', P .. 'ring', 'NX', next_tick, tenant)
    redis.call('INCRBY', P .. 'clock', next_tick - tick)
    if LANES then
      redis.call('SADD', P .. 'lanes:of:' .. tenant, 'send_email')
      redis.call('SADD', P .. 'lanes', 'send_email')
      redis.call('HLEN', P .. 'shares')
    end
    redis.call('SPUBLISH', P .. 'wake', 'send_email') -- its lane's workers wake
    if redis.call('LLEN', P .. 'wakeups') == 0 then redis.call('RPUSH', P .. 'wakeups', 1) end
  end
  note('p ' .. tenant .. '\n')
  return 1
end)

-- finish_pop(worker, lease_seconds, count, [id, lease_token]...): finishes the tasks the
-- caller holds the lease of, then leases up to `count`, each the ring's first tenant's
-- first task (a tenant goes to the back after each).
redis.register_function('finish_pop', function(keys, args)
  local worker, lease_us, wanted = args[1], tonumber(args[2]) * 1000000, tonumber(args[3])
  local ttl = tonumber(redis.call('HGET', P .. 'settings', 'finished_ttl') or 86400)
  local now = now_us()
  -- what a real call would check too: the maintenance's quiet mark, shares and defaults
  redis.call('EXISTS', P .. 'maintenance:quiet')
  redis.call('EXISTS', P .. 'shares', P .. 'names:defaults')
  local record, finished = '', 0
  for i = 4, #args, 2 do
    local id = args[i]
    local task = P .. 't:' .. id
    local held = redis.call('HMGET', task, 'lease_token', 'tenant')
    if held[1] == args[i + 1] then
      redis.call('HSET', task, 'state', 'finished', 'finished_at', now)
      redis.call('EXPIRE', task, ttl)
      redis.call('ZREM', P .. 'leases', id)
      if REGISTRY then redis.call('ZADD', P .. 'finished', now + ttl * 1000000, id) end
      if RUNNING then redis.call('HINCRBY', P .. 'running', held[2], -1) end
      record, finished = record .. 'f ' .. held[2] .. '\n', finished + 1
    end
  end
  local ring = P .. 'ring'
  local reply = {finished}
  local tick, tick0 = nil, nil
  for _ = 1, wanted do
    local first = redis.call('ZRANGE', ring, 0, 0)[1]
    if not first then break end
    local id, more
    if ORDERED and URGENCY then
      local queue = P .. 'q:' .. first
      -- The head of the highest level is taken, and put back if the last entry's level
      -- differs and another level's head is more urgent (never in the bench).
      local head = redis.call('ZPOPMIN', queue)
      local tail = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')
      id, more = head[1], tail[1] ~= nil
      local top = math.floor(tonumber(head[2]) / 2 ^ 51)
      if more and math.floor(tonumber(tail[2]) / 2 ^ 51) ~= top then
        local best, best_score = (6 - top) / 5 * (now - tonumber(head[2]) % 2 ^ 51), nil
        for slot = top + 1, math.floor(tonumber(tail[2]) / 2 ^ 51) do
          local level_head = redis.call('ZRANGE', queue, slot * 2 ^ 51, '(' .. (slot + 1) * 2 ^ 51,
            'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
          if level_head[1] then
            local urgency = (6 - slot) / 5 * (now - tonumber(level_head[2]) % 2 ^ 51)
            if urgency > best then id, best, best_score = level_head[1], urgency, level_head[2] end
          end
        end
        if best_score then
          redis.call('ZADD', queue, head[2], head[1])
          redis.call('ZREM', queue, id)
        end
      end
    elseif ORDERED then
      local queue = P .. 'q:' .. first
      id = redis.call('ZPOPMIN', queue)[1]
      more = redis.call('ZCARD', queue) > 0
    elseif PRIORITIES then
      local entry = tonumber(redis.call('ZSCORE', P .. 'ready', first))
      local levels, level = entry % 64, 5
      while level > 0 and levels % (2 ^ (level + 1)) < 2 ^ level do level = level - 1 end
      local queue = P .. 'q:' .. first .. ':' .. level
      id = redis.call('LPOP', queue)
      entry = entry - 64
      if redis.call('LLEN', queue) == 0 then entry = entry - 2 ^ level end
      more = entry >= 64
      if more then
        redis.call('ZADD', P .. 'ready', entry, first)
      else
        redis.call('ZREM', P .. 'ready', first)
      end
    else
      local queue = P .. 'q:' .. first
      id = redis.call('LPOP', queue)
      more = redis.call('LLEN', queue) > 0
    end
    if tick == nil then tick = tonumber(redis.call('GET', P .. 'clock') or '0') end
    local next_tick = now > tick and now or tick + 1
    if more then
      redis.call('ZADD', ring, 'XX', next_tick, first)
    else
      redis.call('ZREM', ring, first)
      if LANES then
        redis.call('SREM', P .. 'lanes:of:' .. first, 'send_email')
        if redis.call('EXISTS', ring) == 0 then redis.call('SREM', P .. 'lanes', 'send_email') end
      end
    end
    local task = P .. 't:' .. id
    local fields
    if ROW then
      fields = redis.call('HMGET', task, 'row', 'ready_at', 'attempts')
    else
      fields = redis.call('HMGET', task, 'payload', 'ready_at', 'attempts', 'name', 'priority',
        'timeout', 'max_retries', 'created_at', 'kind', 'tenant')
    end
    local token = string.format('%.0f', next_tick)
    redis.call('HSET', task, 'state', 'started', 'lease_token', token, 'worker_id', worker,
      'lease_deadline', now + lease_us, 'attempts', (tonumber(fields[3]) or 0) + 1)
    redis.call('ZADD', P .. 'leases', now + lease_us, id)
    if RUNNING then redis.call('HINCRBY', P .. 'running', first, 1) end
    local waited = (now - tonumber(fields[2])) / 1000
    local bucket = waited < 1 and 0 or math.min(47, 1 + math.floor(math.log(waited) / 0.405465))
    record = record .. 's ' .. first .. ' ' .. bucket .. '\n'
    reply[#reply + 1], reply[#reply + 2], reply[#reply + 3] = id, fields[1], token
    if tick0 == nil then tick0 = tick end
    tick = next_tick
  end
  if tick0 then
    redis.call('INCRBY', P .. 'clock', tick - tick0)
    redis.call('LLEN', P .. 'wakeups') -- the lane's token, passed on or taken
  end
  if record ~= '' then note(record) end
  return reply
end)
"""
PAYLOAD = b"\x81\xa1n\x01"
# Variants of the library: label -> the flags of LEAN_LIBRARY it sets, with their values.
# The first two turn one choice back to format 2's, the next two cost what the sketch
# keeps by dropping it, the next three add priority levels (the last as design.md section
# 5 takes them: by urgency), the next is that one with the running counts left to the
# counters (a tenant's running tasks as its starts less its ends, which the log counts
# anyway; a concurrency limit would still need them counted), and the last adds to it
# format 2's sets of lanes.
VARIANTS: dict[str, dict[str, str]] = {
    "counters and ready counts written by each call": {"LOG": "false"},
    "a task's fixed fields a field each": {"ROW": "false"},
    "no finished registry (less than a queue keeps)": {"REGISTRY": "false"},
    "no running counts (less than a queue keeps)": {"RUNNING": "false"},
    "with priority levels (a list per level, a ready entry)": {"PRIORITIES": "true"},
    "with priority levels (one zset per tenant by level and tick)": {"ORDERED": "true"},
    "with priority levels (one zset per tenant, popped by urgency)": {
        "ORDERED": "true",
        "URGENCY": "true",
    },
    "popped by urgency, running counts from the counters": {
        "ORDERED": "true",
        "URGENCY": "true",
        "RUNNING": "false",
    },
    "popped by urgency, with format 2's lane sets": {
        "ORDERED": "true",
        "URGENCY": "true",
        "LANES": "true",
    },
}


def variant(flags: dict[str, str]) -> str:
    """LEAN_LIBRARY with ``flags`` set to their values."""
    library = LEAN_LIBRARY
    for flag, value in flags.items():
        library, changed = re.subn(rf"^local {flag} = \w+$", f"local {flag} = {value}", library,
                                   flags=re.M)  # fmt: skip
        assert changed == 1, flag
    return library


def new_id() -> str:
    return base64.urlsafe_b64encode(os.urandom(15)).decode()


def lean_row(tenant: str) -> bytes:
    """A task's fixed fields as one MessagePack array, the size of fairque's."""
    return msgspec.msgpack.encode(["send_email", PAYLOAD, 3, 300.0, 3, 1796673910380360, tenant])


@contextmanager
def loaded(
    server: CountedServer, tenants: int, tasks: int, library: str
) -> Iterator[tuple[redis.Redis, list[tuple[str, str, bytes]]]]:
    """A client of ``server`` with ``library`` loaded, and ``tasks`` tasks' push arguments
    (id, tenant, row) over ``tenants``; the library and its keys go at the end."""
    client = redis.Redis.from_url(server.url)
    client.function_load(library, replace=True)
    rows = {tenant: lean_row(tenant) for tenant in (f"tenant-{i}" for i in range(tenants))}
    try:
        yield client, [(new_id(), f"tenant-{i % tenants}", rows[f"tenant-{i % tenants}"])
                       for i in range(tasks)]  # fmt: skip
    finally:
        client.function_delete("lean")
        client.delete(*client.keys("lean:{l}:*"))
        client.close()


def lean_counts(
    server: CountedServer, tenants: int, tasks: int, library: str = LEAN_LIBRARY, count: int = 1
) -> tuple[float, float]:
    """One push per call of ``tasks`` tasks, then a worker draining them ``count`` a call,
    each call finishing what the one before leased (``count`` 1: concurrency 1)."""
    with loaded(server, tenants, tasks, library) as (client, rows):
        return lean_drain(server, client, rows, count)


def lean_drain(
    server: CountedServer, client: redis.Redis, rows: list[tuple[str, str, bytes]], count: int
) -> tuple[float, float]:
    """``rows`` pushed one a call, then drained ``count`` a call: each counted per task."""
    tasks = len(rows)
    leased = 0

    def push() -> None:
        for id_, tenant, row in rows:
            client.fcall("push", 1, "lean:{l}:ring", id_, tenant, row)

    def drain() -> None:
        nonlocal leased
        held: list[str] = []
        while True:
            reply = client.fcall("finish_pop", 1, "lean:{l}:ring", "w", 300, count, *held)
            if len(reply) < 2:
                return
            leased += (len(reply) - 1) // 3
            held = []
            for i in range(1, len(reply), 3):
                held += [reply[i].decode(), reply[i + 2].decode()]

    pushed = server.measure("lean_push", push)
    cycled = server.measure("lean_cycle", drain)
    assert leased == tasks, f"every task pushed was leased once ({leased} of {tasks})"
    # What a reader adds: the folded counters and the records still in the log.
    log = client.get("lean:{l}:log")
    lines = log.splitlines() if isinstance(log, bytes) else []
    for counter, kind in (("pushed", b"p "), ("finished", b"f ")):
        counted = int(client.hget("lean:{l}:stats", counter) or 0)
        counted += sum(line.startswith(kind) for line in lines)
        assert counted == tasks, f"{counter}: {counted} of {tasks}"
    return pushed / tasks, cycled / tasks


def lean_life(
    server: CountedServer, tenants: int, tasks: int, library: str = LEAN_LIBRARY
) -> float:
    """A job's life as the peers' life row has it, one job at a time: a push (its tenant
    joins the ring, a wake-up token is left), the worker's wait ending on the token and
    the pop behind it in one pipeline, then its finish, whose pop finds nothing."""
    finished = 0
    with loaded(server, tenants, tasks, library) as (client, rows):

        def lives() -> None:
            nonlocal finished
            for id_, tenant, row in rows:
                client.fcall("push", 1, "lean:{l}:ring", id_, tenant, row)
                pipe = client.pipeline(transaction=False)
                pipe.blpop(["lean:{l}:wakeups"], timeout=1)
                pipe.fcall("finish_pop", 1, "lean:{l}:ring", "w", 300, 1)
                _, reply = pipe.execute()
                reply = client.fcall("finish_pop", 1, "lean:{l}:ring", "w", 300, 1,
                                     reply[1].decode(), reply[3].decode())  # fmt: skip
                assert len(reply) == 1, "nothing is left to lease"
                finished += reply[0]

        counted = server.measure("lean_life", lives)
    assert finished == tasks, f"every task finished ({finished} of {tasks})"
    return counted / tasks


def fairque_life(server: CountedServer, tenants: int, tasks: int, namespace: str) -> float:
    """The same life in fairque: a push, an idle worker's wait and pop (``idle_pop``: its
    wake-up token's ``BLPOP`` and the call behind it, one pipeline), a finish whose pop
    finds nothing (``finish_and_pop``), as its worker makes them."""
    queue = FairQueue(server.url, namespace)
    finished = 0

    def lives(count: int) -> None:
        nonlocal finished
        for i in range(count):
            queue.push(task(i, tenants))
            leased, _ = queue.idle_pop(1.0, 1, worker_id="bench", ttl=60, longest_wait=45,
                                       round_interval=30, names=["send_email"])  # fmt: skip
            lost, more = queue.finish_and_pop(leased, count=1, worker_id="bench",
                                              names=["send_email"])  # fmt: skip
            assert not lost, "the task finished"
            assert not more, "nothing is left to lease"
            finished += len(leased)

    lives(1)  # outside the count: the namespace's first call writes its settings
    counted = server.measure(f"{namespace}_life", lambda: lives(tasks))
    assert finished == tasks + 1, f"every task finished ({finished - 1} of {tasks})"
    queue.close()
    return counted / tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=2)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        server = CountedServer(str(valkey_binary()), Path(folder), free_port())
        try:
            warm_up(server, options.tenants)
            lean_counts(server, options.tenants, 100)  # loads and warms the library
            for run in range(options.repeat):
                push, cycle = lean_counts(server, options.tenants, options.tasks)
                c1 = cycles(server, options.tenants, 1, True, names=["send_email"],
                            tasks=options.tasks)  # fmt: skip
                _, cycle10 = lean_counts(server, options.tenants, options.tasks, count=10)
                c10 = cycles(server, options.tenants, 10, True, names=["send_email"],
                             tasks=options.tasks)  # fmt: skip
                print(f"run {run + 1}: finish + pop 10 a call: lean {cycle10 / 1000:.1f}k,"
                      f" fairque {c10 / 1000:.1f}k", flush=True)  # fmt: skip
                single = one_per_call(server, options.tenants, f"named{run}", ["send_email"])
                print(f"run {run + 1}: push lean {push / 1000:.1f}k, fairque"
                      f" {single['push'] / 1000:.1f}k; concurrency 1 lean {cycle / 1000:.1f}k,"
                      f" fairque {c1 / 1000:.1f}k", flush=True)  # fmt: skip
                lean = lean_life(server, options.tenants, options.tasks)
                ours = fairque_life(server, options.tenants, options.tasks, f"life{run}")
                print(f"run {run + 1}: a job's life, one at a time: lean {lean / 1000:.1f}k,"
                      f" fairque {ours / 1000:.1f}k", flush=True)  # fmt: skip
                for label, flags in VARIANTS.items():
                    library = variant(flags)
                    push, cycle = lean_counts(server, options.tenants, options.tasks, library)
                    life = lean_life(server, options.tenants, options.tasks, library)
                    print(f"run {run + 1}: lean, {label}: push {push / 1000:.1f}k,"
                          f" concurrency 1 {cycle / 1000:.1f}k, life {life / 1000:.1f}k",
                          flush=True)  # fmt: skip
        finally:
            server.stop()


if __name__ == "__main__":
    main()
