"""The client's share of a push: CPU time per task in the producer's process, beside
redis-py's bare ``FCALL`` loop as the floor, on one throwaway embedded Valkey.

    uv run python bench/bench_client.py [--tasks 100000] [--repeat 3] [--no-async] [--profile]

Prints, never asserts: the client CPU time per task (``time.process_time()``, the
producer's own process; the server runs in another) of a push of ``--tasks`` tasks

- one per call: ``FairQueue.push(Task(...))``, and ``await AsyncFairQueue.push`` awaited
  one after another (the asyncio client then sends each alone);
- in batches of 1,000: ``push_many`` of a list of ``Task`` objects, sync and asyncio;

beside the floor: ``redis.Redis.fcall`` of a Lua function that does nothing (``noop``)
with the same keys and arguments as fairque's push call (one task's; a batch's), built
once beforehand; the asyncio client's floor awaits ``redis.asyncio.Redis.fcall`` of the
same, one call after another. Building the ``Task`` objects is timed (a producer pays
for it). The runs alternate, floor and fairque, in every round (which goes first alternates too:
this machine's speed swings within seconds), each round is printed, then the medians
and fairque's ratio to its floor. ``--profile`` also prints where one-per-call sync
pushes spend the client's CPU (cProfile, timer ``time.process_time``, own time).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis
import redis.asyncio as aioredis

from fairque import AsyncFairQueue, FairQueue, Task
from fairque.queue.calls import push
from fairque.servers.embedded import LocalServer

TENANTS = 50
BATCH = 1_000
NOOP_LIBRARY = """#!lua name=bench_client
redis.register_function('noop', function(keys, args) return 1 end)
"""


def task(i: int) -> Task:
    return Task(user_id=f"tenant-{i % TENANTS}", name="send_email", payload={"n": i})


def push_args(queue: FairQueue, tasks: list[Task]) -> tuple[Any, ...]:
    """``numkeys, *keys, *args`` of fairque's push call of ``tasks`` (the floor's)."""
    namespace = queue.namespace
    call = push.push_one(namespace, tasks[0]) if len(tasks) == 1 else push.push(namespace, tasks)
    return (len(call.keys), *call.keys, *call.args)


# Each run: (url, namespace, tasks) -> client CPU seconds of its timed part.
Run = Callable[[str, str, int], float]


def sync_one(url: str, namespace: str, count: int) -> float:
    with FairQueue(url, namespace) as queue:
        queue.push(task(0))  # settings written, script loaded: not what is measured
        started = time.process_time()
        for i in range(count):
            queue.push(task(i))
        return time.process_time() - started


def sync_batches(url: str, namespace: str, count: int) -> float:
    with FairQueue(url, namespace) as queue:
        queue.push(task(0))
        started = time.process_time()
        for first in range(0, count, BATCH):
            queue.push_many([task(i) for i in range(first, first + BATCH)])
        return time.process_time() - started


def async_one(url: str, namespace: str, count: int) -> float:
    async def run() -> float:
        async with AsyncFairQueue(url, namespace) as queue:
            await queue.push(task(0))
            started = time.process_time()
            for i in range(count):
                await queue.push(task(i))
            return time.process_time() - started

    return asyncio.run(run())


def async_batches(url: str, namespace: str, count: int) -> float:
    async def run() -> float:
        async with AsyncFairQueue(url, namespace) as queue:
            await queue.push(task(0))
            started = time.process_time()
            for first in range(0, count, BATCH):
                await queue.push_many([task(i) for i in range(first, first + BATCH)])
            return time.process_time() - started

    return asyncio.run(run())


def floor(size: int, *, with_asyncio: bool = False) -> Run:
    """The bare ``FCALL`` loop: ``count / size`` calls of the no-op function, each with
    the keys and arguments of fairque's push of ``size`` tasks, by a plain blocking
    redis-py client (or an asyncio one)."""

    def run(url: str, namespace: str, count: int) -> float:
        with FairQueue(url, namespace) as queue:
            arguments = push_args(queue, [task(i) for i in range(size)])
        if with_asyncio:
            return asyncio.run(async_fcalls(url, arguments, count // size))
        client = redis.Redis.from_url(url)
        try:
            client.fcall("noop", *arguments)  # connected: not what is measured
            started = time.process_time()
            for _ in range(count // size):
                client.fcall("noop", *arguments)
            return time.process_time() - started
        finally:
            client.close()

    return run


async def async_fcalls(url: str, arguments: tuple[Any, ...], calls: int) -> float:
    """Client CPU seconds of ``calls`` awaits of ``redis.asyncio.Redis.fcall``."""
    client = aioredis.Redis.from_url(url)
    try:
        await client.fcall("noop", *arguments)
        started = time.process_time()
        for _ in range(calls):
            await client.fcall("noop", *arguments)
        return time.process_time() - started
    finally:
        await client.aclose()


@dataclass(frozen=True)
class Pair:
    name: str
    fairque: Run
    floor: Run


def pairs(with_async: bool) -> list[Pair]:
    chosen = [
        Pair("sync push, one per call", sync_one, floor(1)),
        Pair(f"sync push_many, batches of {BATCH:,}", sync_batches, floor(BATCH)),
    ]
    if with_async:
        chosen += [
            Pair("async push, one per call", async_one, floor(1, with_asyncio=True)),
            Pair(
                f"async push_many, batches of {BATCH:,}",
                async_batches,
                floor(BATCH, with_asyncio=True),
            ),
        ]
    return chosen


def usec_per_task(url: str, run: Run, count: int) -> float:
    """Client CPU microseconds per task of one run, in a fresh namespace of an empty
    server (each run's keyspace alike)."""
    seconds = run(url, f"bench-{uuid.uuid4().hex[:8]}", count)
    admin = redis.Redis.from_url(url)
    admin.flushdb()
    admin.close()
    return seconds / count * 1e6


def bench(count: int, repeat: int, with_async: bool) -> None:
    with LocalServer() as server:
        admin = redis.Redis.from_url(server.url)
        admin.function_load(NOOP_LIBRARY, replace=True)
        version = admin.info("server").get("valkey_version", "?")
        admin.close()
        print(f"valkey {version}, {count:,} tasks per run, client CPU us per task")
        chosen = pairs(with_async)
        figures: dict[str, tuple[list[float], list[float]]] = {
            pair.name: ([], []) for pair in chosen
        }
        for round_ in range(1, repeat + 1):
            for pair in chosen:
                ours, floors = figures[pair.name]
                if round_ % 2:
                    floors.append(usec_per_task(server.url, pair.floor, count))
                    ours.append(usec_per_task(server.url, pair.fairque, count))
                else:
                    ours.append(usec_per_task(server.url, pair.fairque, count))
                    floors.append(usec_per_task(server.url, pair.floor, count))
                print(
                    f"round {round_}  {pair.name:<36} fairque {ours[-1]:7.2f}"
                    f"  floor {floors[-1]:7.2f}  ratio {ours[-1] / floors[-1]:5.2f}",
                    flush=True,
                )
        print(f"\nmedians of {repeat} rounds")
        print(f"{'scenario':<36} {'fairque':>8} {'floor':>8} {'ratio':>6}")
        for pair in chosen:
            ours, floors = figures[pair.name]
            ratios = [a / b for a, b in zip(ours, floors, strict=True)]
            print(
                f"{pair.name:<36} {statistics.median(ours):8.2f}"
                f" {statistics.median(floors):8.2f} {statistics.median(ratios):6.2f}"
            )


def profile_one_by_one(count: int) -> None:
    """Where the client's CPU goes for one sync push per call (cProfile, own time)."""
    with LocalServer() as server, FairQueue(server.url, "bench-profile") as queue:
        queue.push(task(0))
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        for i in range(count):
            queue.push(task(i))
        profiler.disable()
    print(f"\nclient profile, {count:,} sync pushes, one per call (cProfile inflates times)")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000, help="tasks per run")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians count)")
    parser.add_argument("--no-async", action="store_true", help="the sync client only")
    parser.add_argument("--profile", action="store_true", help="profile sync pushes too")
    options = parser.parse_args()
    bench(options.tasks, options.repeat, not options.no_async)
    if options.profile:
        profile_one_by_one(min(options.tasks, 20_000))


if __name__ == "__main__":
    main()
