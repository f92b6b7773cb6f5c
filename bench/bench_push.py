"""Push throughput on a throwaway server: one task per call, batches, and the async
client with one producer and with 100 concurrent producers, tasks per second.

    uv run python bench/bench_push.py [--redis-server] [--repeat 3] [--profile]

Prints figures (best of --repeat runs; this machine's timings vary from run to run) and
the server's time per task for each scenario (``INFO commandstats``: FCALL,
usec over tasks, in the best run); asserts nothing. Tasks go to 50 tenants with a small
payload, and building the Task objects is part of what is timed: that is what a
producer pays. ``--profile`` also prints where one-at-a-time sync pushes spend the
client's time (cProfile, top functions by own time).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from fairque import AsyncFairQueue, FairQueue, Task
from fairque.servers.embedded import LocalServer

TENANTS = 50
PRODUCERS = 100


def task(i: int) -> Task:
    return Task(user_id=f"tenant-{i % TENANTS}", payload={"n": i})


def sync_one_by_one(url: str, namespace: str, count: int) -> None:
    with FairQueue(url, namespace) as queue:
        queue.push(task(0))  # settings written, script loaded: not what is measured
        started = time.perf_counter()
        for i in range(1, count):
            queue.push(task(i))
        Timer.elapsed = time.perf_counter() - started


def sync_batches(url: str, namespace: str, count: int) -> None:
    with FairQueue(url, namespace) as queue:
        queue.push(task(0))
        started = time.perf_counter()
        for first in range(0, count, 1000):
            queue.push_many([task(i) for i in range(first, first + 1000)])
        Timer.elapsed = time.perf_counter() - started


def async_producers(producers: int) -> Callable[[str, str, int], None]:
    async def produce(queue: AsyncFairQueue, first: int, count: int) -> None:
        for i in range(first, first + count):
            await queue.push(task(i))

    async def run(url: str, namespace: str, count: int) -> None:
        async with AsyncFairQueue(url, namespace) as queue:
            await queue.push(task(0))
            share = count // producers
            started = time.perf_counter()
            await asyncio.gather(*(produce(queue, p * share, share) for p in range(producers)))
            Timer.elapsed = time.perf_counter() - started

    return lambda url, namespace, count: asyncio.run(run(url, namespace, count))


class Timer:
    elapsed = 0.0  # seconds of the last run's timed region


@dataclass(frozen=True)
class Scenario:
    name: str
    tasks: int
    run: Callable[[str, str, int], None]  # (url, namespace, tasks)


SCENARIOS = [
    Scenario("sync push, one per call", 5_000, sync_one_by_one),
    Scenario("sync push_many, batches of 1,000", 50_000, sync_batches),
    Scenario("async push, 1 producer", 5_000, async_producers(1)),
    Scenario(f"async push, {PRODUCERS} producers", 30_000, async_producers(PRODUCERS)),
]


def script_usec(queue: FairQueue) -> tuple[int, int]:
    """(calls, usec) of script calls (FCALL; EVALSHA and EVAL too) since the server started."""
    stats = queue.redis.info("commandstats")
    calls = usec = 0
    for name in ("cmdstat_fcall", "cmdstat_evalsha", "cmdstat_eval"):
        if name in stats:
            calls += int(stats[name]["calls"])
            usec += int(stats[name]["usec"])
    return calls, usec


def measure(url: str, scenario: Scenario) -> tuple[float, float, float]:
    """(seconds, server usec per task, tasks per script call) of one run, in a fresh
    namespace."""
    admin = FairQueue(url, "bench-admin")
    calls_before, usec_before = script_usec(admin)
    scenario.run(url, f"bench-{uuid.uuid4().hex[:8]}", scenario.tasks)
    calls_after, usec_after = script_usec(admin)
    admin.redis.flushdb()  # a throwaway server: keep every run's keyspace alike
    admin.close()
    calls = calls_after - calls_before
    return Timer.elapsed, (usec_after - usec_before) / scenario.tasks, scenario.tasks / calls


def bench(label: str, binary: str | None, repeat: int) -> None:
    with LocalServer(binary) as server:
        print(f"\n{label} ({server_version(server.url)}), best of {repeat}")
        header = f"{'scenario':<34} {'tasks':>7} {'seconds':>8} {'tasks/s':>9}"
        print(f"{header} {'server us/task':>15} {'tasks/call':>11}")
        for scenario in SCENARIOS:
            seconds, usec, per_call = min(measure(server.url, scenario) for _ in range(repeat))
            rate = scenario.tasks / seconds
            print(
                f"{scenario.name:<34} {scenario.tasks:>7,} {seconds:>8.2f} {rate:>9,.0f}"
                f" {usec:>15.1f} {per_call:>11.1f}"
            )


def profile_one_by_one(count: int) -> None:
    """Where the client's time goes for one push per call (cProfile, own time)."""
    with LocalServer() as server, FairQueue(server.url, "bench-profile") as queue:
        queue.push(task(0))
        profiler = cProfile.Profile()
        profiler.enable()
        for i in range(count):
            queue.push(task(i))
        profiler.disable()
    print(f"\nclient profile, {count} sync pushes, one per call (cProfile inflates times)")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def server_version(url: str) -> str:
    with FairQueue(url, "bench-info") as queue:
        info = queue.redis.info("server")
    name = "valkey" if "valkey_version" in info else "redis"
    return f"{name} {info.get('valkey_version', info['redis_version'])}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-server", action="store_true", help="also run on redis-server")
    parser.add_argument("--repeat", type=int, default=3, help="runs per scenario (best counts)")
    parser.add_argument("--profile", action="store_true", help="profile sync pushes too")
    options = parser.parse_args()
    bench("embedded Valkey", None, options.repeat)
    if options.redis_server and (binary := shutil.which("redis-server")):
        bench("Debian redis-server", binary, options.repeat)
    if options.profile:
        profile_one_by_one(5_000)


if __name__ == "__main__":
    main()
