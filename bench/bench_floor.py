"""The floors under the speed targets: the same work with nothing but the server commands
it needs, beside what fairque pays for it, on one throwaway embedded Valkey.

    uv run python bench/bench_floor.py [--tasks 20000] [--queued 100000] [--repeat 3]

Prints, never asserts (the best of --repeat runs for each figure):

- one push per call from one blocking client: a bare ``PING`` loop (this machine's round
  trip), a function that only stores the task (``HSET`` and ``ZADD``), and fairque's push;
- the server's time per task over a task's life, from ``INFO commandstats``: pushed in
  batches of 1,000, popped and finished 100 at a time. The floor runs only the commands
  that life needs (push: ``HSET``, ``ZADD``; pop: ``ZPOPMIN``, ``HMGET``, ``HSET``,
  ``ZADD``; finish: ``HGET``, ``ZREM``, ``HSET``, ``EXPIRE``) in functions with no other
  logic; fairque's scripts also keep the fairness ring, counters, leases and figures;
- bulk push in batches of 1,000 from one client, the same two;
- the server's memory per queued task: a key per task holding a 30-byte string plus a
  sorted-set entry (the least a record of its own and a queue ordered by time can take),
  one hash for all records instead of a key each, and fairque's;
- the task's own call: redis-py asyncio ``INCR``s, 200 at a time on uvloop in one process
  with no queue at all; no worker process drains one-call tasks faster.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import redis
import uvloop
from bench_engine import make_task, pop_finish, push_batches
from bench_memory import queued_bytes
from redis.asyncio import Redis as AsyncRedis

from fairque import FairQueue
from fairque.servers.embedded import LocalServer

# The commands a task's life needs, and nothing else: no fairness, counters or checks.
FLOOR_LIBRARY = """#!lua name=floor
local CREATED = 1795694632621433
redis.register_function('push', function(keys, args)
  for i = 1, #args, 2 do
    local id = args[i]
    redis.call('HSET', keys[2] .. id, 'tenant', 't1', 'name', 'send_email', 'priority', 3,
      'payload', args[i + 1], 'created_at', CREATED, 'state', 'queued')
    redis.call('ZADD', keys[1], CREATED, id)
  end
  return #args / 2
end)
redis.register_function('pop', function(keys, args)
  local leased = {}
  for i = 1, tonumber(args[1]) do
    local id = redis.call('ZPOPMIN', keys[1])[1]
    if not id then break end
    local key = keys[3] .. id
    redis.call('HMGET', key, 'priority', 'name', 'payload', 'created_at')
    redis.call('HSET', key, 'state', 'started', 'lease_token', i, 'worker_id', 'w1')
    redis.call('ZADD', keys[2], CREATED, id)
    leased[#leased + 1] = id
  end
  return leased
end)
redis.register_function('finish', function(keys, args)
  for _, id in ipairs(args) do
    local key = keys[2] .. id
    redis.call('HGET', key, 'lease_token')
    redis.call('ZREM', keys[1], id)
    redis.call('HSET', key, 'state', 'finished')
    redis.call('EXPIRE', key, 86400)
  end
  return #args
end)
"""
FLOOR_KEYS = ("floor:{f}:queue", "floor:{f}:leases", "floor:{f}:task:")
PAYLOAD = b"\x81\xa1n\x01"  # a small MessagePack payload, as fairque's benches push


def new_id() -> str:
    """An id like fairque's generated ones: 20 URL-safe characters."""
    return base64.urlsafe_b64encode(os.urandom(15)).decode()


def floor_push(client: redis.Redis, count: int) -> None:
    arguments: list[str | bytes] = []
    for _ in range(count):
        arguments += [new_id(), PAYLOAD]
    client.fcall("push", 2, FLOOR_KEYS[0], FLOOR_KEYS[2], *arguments)


def floor_pop(client: redis.Redis, count: int) -> list[bytes]:
    leased: list[bytes] = client.fcall("pop", 3, *FLOOR_KEYS, count)
    return leased


def floor_finish(client: redis.Redis, leased: list[bytes]) -> None:
    client.fcall("finish", 2, FLOOR_KEYS[1], FLOOR_KEYS[2], *leased)


def floor_drain(client: redis.Redis) -> None:
    while leased := floor_pop(client, 100):
        floor_finish(client, leased)


def function_usec(client: redis.Redis) -> int:
    """Microseconds the server has spent in FCALL (the commands a function makes are
    inside it), from ``INFO commandstats``; fairque's scripts are functions too."""
    return int(client.info("commandstats").get("cmdstat_fcall", {}).get("usec", 0))


def calls_per_second(
    client: redis.Redis, repeat: int, calls: int, call: Callable[[int], object]
) -> tuple[float, float]:
    """Rate of ``calls`` calls of ``call(i)`` in a row, and the server's microseconds per
    call in functions, each the best of ``repeat`` runs."""
    best, server = float("inf"), float("inf")
    for _ in range(repeat):
        before = function_usec(client)
        started = time.perf_counter()
        for i in range(calls):
            call(i)
        best = min(best, time.perf_counter() - started)
        server = min(server, (function_usec(client) - before) / calls)
    return calls / best, server


@contextmanager
def fairque_queue(url: str) -> Iterator[FairQueue]:
    queue = FairQueue(url, f"floor-{uuid.uuid4().hex[:8]}")
    try:
        yield queue
    finally:
        queue.close()


def one_push_per_call(url: str, client: redis.Redis, tasks: int, repeat: int) -> None:
    calls = tasks // 4
    print(f"\none push per call, {calls:,} calls: calls/s, server us per call")
    with fairque_queue(url) as queue:
        rows = {
            "PING (the round trip)": calls_per_second(
                client, repeat, calls, lambda _: client.ping()
            ),
            "HSET + ZADD in a function": calls_per_second(
                client, repeat, calls, lambda _: floor_push(client, 1)
            ),
            "fairque push": calls_per_second(
                client, repeat, calls, lambda i: queue.push(make_task(i))
            ),
        }
    for row, (rate, server) in rows.items():
        print(f"  {row:<26} {rate:>9,.0f}   {server:>6.1f} us")


def life_of_a_task(url: str, client: redis.Redis, tasks: int, repeat: int) -> None:
    """Server time per task (push + pop + finish) and bulk push rates, floor and fairque."""
    floor_us, ours_us, floor_rate, ours_rate = [], [], 0.0, 0.0
    for _ in range(repeat):
        before = function_usec(client)
        started = time.perf_counter()
        for _ in range(tasks // 1000):
            floor_push(client, 1000)
        floor_rate = max(floor_rate, tasks / (time.perf_counter() - started))
        floor_drain(client)
        floor_us.append((function_usec(client) - before) / tasks)
        with fairque_queue(url) as queue:
            before = function_usec(client)
            started = time.perf_counter()
            push_batches(queue, tasks)
            ours_rate = max(ours_rate, tasks / (time.perf_counter() - started))
            pop_finish(100)(queue, tasks)
            ours_us.append((function_usec(client) - before) / tasks)
        client.flushdb()
    print(f"\na task's life, {tasks:,} tasks: server us per task (push in batches of 1,000,"
          " pop and finish 100 at a time); bulk push tasks/s")  # fmt: skip
    print(f"  the commands alone   {min(floor_us):>6.1f} us   {floor_rate:>9,.0f}/s")
    print(f"  fairque              {min(ours_us):>6.1f} us   {ours_rate:>9,.0f}/s")


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def layout_bytes(tasks: int, write: Callable[[redis.client.Pipeline, int, str], None]) -> float:
    """Server memory per task of a layout ``write`` makes, on a server of its own."""
    with LocalServer() as server, redis.Redis.from_url(server.url) as client:
        before = used_memory(client)
        pipe = client.pipeline(transaction=False)
        for i in range(tasks):
            write(pipe, i, new_id())
            if i % 5000 == 4999:
                pipe.execute()
        pipe.execute()
        return (used_memory(client) - before) / tasks


def own_key(pipe: redis.client.Pipeline, i: int, task_id: str) -> None:
    pipe.set(f"fq:{{q}}:task:{task_id}", b"r" * 30)
    pipe.zadd(f"fq:{{q}}:queue:t{i % 50}", {task_id: 1795694632621433 + i})


def one_hash(pipe: redis.client.Pipeline, i: int, task_id: str) -> None:
    pipe.hset("fq:{q}:tasks", task_id, b"r" * 30)
    pipe.zadd(f"fq:{{q}}:queue:t{i % 50}", {task_id: 1795694632621433 + i})


def memory(tasks: int) -> None:
    print(f"\nserver memory per queued task, {tasks:,} tasks over 50 queues")
    layouts: dict[str, Callable[[], float]] = {
        "a key of 30 bytes each + a sorted-set entry": lambda: layout_bytes(tasks, own_key),
        "one hash of 30-byte values + a sorted-set entry": lambda: layout_bytes(tasks, one_hash),
        "fairque (named tasks, small payload)": lambda: queued_bytes(tasks),
    }
    for layout, measure in layouts.items():
        print(f"  {layout:<48} {measure():>5.0f} B")


def task_calls(url: str, calls: int, repeat: int) -> None:
    """INCRs per second from 200 concurrent coroutines on uvloop, as one-call tasks make."""

    async def run() -> float:
        client = AsyncRedis.from_url(url, max_connections=256)
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            for _ in range(calls // 200):
                await asyncio.gather(*(client.incr("floor:calls") for _ in range(200)))
            best = min(best, time.perf_counter() - started)
        await client.aclose()
        return calls / best

    rate = uvloop.run(run())
    print(f"\nthe task's own call: {rate:,.0f} redis-py asyncio INCRs/s, 200 at a time, "
          "one process on uvloop, no queue")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--queued", type=int, default=100_000, help="tasks for the memory figures")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best counts)")
    options = parser.parse_args()
    with LocalServer() as server, redis.Redis.from_url(server.url) as client:
        client.function_load(FLOOR_LIBRARY, replace=True)
        one_push_per_call(server.url, client, options.tasks, options.repeat)
        life_of_a_task(server.url, client, options.tasks, options.repeat)
        task_calls(server.url, options.tasks, options.repeat)
        client.flushdb()
    memory(options.queued)


if __name__ == "__main__":
    main()
