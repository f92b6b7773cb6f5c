"""Tunable shares on a throwaway server: what held tenants cost a pop, and weights at work.

    uv run python bench/bench_shares.py [--redis-server] [--repeat 3]

1. pop+finish with 10,000 tenants of which 9,000 are at their concurrency limit, against
   the same 10,000 tenants with no limit. A held tenant is out of the ring, so the two
   should be alike (issue 18: within 20%).
2. The standard fairness scenario (tenant "big" pushes 5,000 tasks, then 50 small tenants
   10 each), served one task at a time, with weights: where the last small task
   completes, beside the ideal of a fluid fair share (the small tenants finish when
   "big" has had 10 x weight(big) / weight(small) tasks: 500 + that).

Prints figures (best of --repeat runs); asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import shutil
import time
import uuid

from fairque import FairQueue, Task
from fairque.servers.embedded import LocalServer

TENANTS = 10_000
HELD = 9_000
MEASURED = 5_000


def _queue(url: str) -> FairQueue:
    return FairQueue(url, f"bench-{uuid.uuid4().hex[:8]}")


def _push(queue: FairQueue, tasks: list[Task]) -> None:
    for first in range(0, len(tasks), 1000):
        queue.push_many(tasks[first : first + 1000])


def held_setup(queue: FairQueue, held: int) -> None:
    """``held`` tenants each at its limit of 1 (one task running, two waiting), then
    the other tenants with 30 ready tasks each."""
    _push(queue, [Task(user_id=f"held-{i}", payload=j) for i in range(held) for j in range(3)])
    for i in range(held):
        queue.set_tenant(f"held-{i}", concurrency=1)
    running = 0
    while running < held:
        running += len(queue.pop(count=1000))
    free = TENANTS - held
    _push(queue, [Task(user_id=f"free-{i}", payload=j) for j in range(30) for i in range(free)])


def drain(queue: FairQueue, batch: int) -> float:
    started = time.perf_counter()
    done = 0
    while done < MEASURED:
        leased = queue.pop(count=batch)
        queue.finish_many(leased)
        done += len(leased)
    return time.perf_counter() - started


def held_figures(url: str, repeat: int) -> None:
    print(f"\npop+finish of {MEASURED:,} tasks, {TENANTS:,} tenants with ready work")
    print(f"{'tenants at their limit':<24} {'count':>6} {'tasks/s':>10} {'us/call (server)':>17}")
    for batch in (1, 100):
        rates = {}
        for held in (0, HELD):
            best = math.inf
            server_us = 0.0
            for _ in range(repeat):
                queue = _queue(url)
                held_setup(queue, held)
                queue.redis.config_resetstat()
                best = min(best, drain(queue, batch))
                server_us = pop_server_time(queue)
                queue.redis.flushdb()
                queue.close()
            rates[held] = MEASURED / best
            print(f"{held:<24,} {batch:>6} {rates[held]:>10,.0f} {server_us:>17.1f}")
        print(f"{'ratio held / none':<24} {batch:>6} {rates[HELD] / rates[0]:>10.2f}")


def pop_server_time(queue: FairQueue) -> float:
    """Mean server time of one script call (us; pops and finishes alike: they share
    FCALL's figures in INFO commandstats)."""
    entry = queue.redis.info("commandstats").get("cmdstat_fcall", {})
    return float(entry.get("usec_per_call", 0.0))


def last_small_position(url: str, big_weight: int, small_weight: int) -> int:
    queue = _queue(url)
    _push(queue, [Task(user_id="big", payload=i) for i in range(5_000)])
    _push(queue, [Task(user_id=f"small-{s}", payload=i) for s in range(50) for i in range(10)])
    if big_weight != 1:
        queue.set_tenant("big", weight=big_weight)
    if small_weight != 1:
        for s in range(50):
            queue.set_tenant(f"small-{s}", weight=small_weight)
    small_left, position = 500, 0
    while small_left:
        (task,) = queue.pop(count=1)
        queue.finish(task)
        position += 1
        if task.user_id != "big":
            small_left -= 1
    queue.redis.flushdb()
    queue.close()
    return position


def weight_figures(url: str) -> None:
    print("\nlast small task completes at (of 5,500; one task at a time)")
    print(f"{'weights big / small':<20} {'measured':>9} {'ideal':>6}")
    for big_weight, small_weight in ((1, 1), (1, 3), (3, 1), (5, 1)):
        ideal = 500 + math.ceil(10 * big_weight / small_weight)
        measured = last_small_position(url, big_weight, small_weight)
        print(f"{f'{big_weight} / {small_weight}':<20} {measured:>9,} {ideal:>6,}")


def bench(label: str, binary: str | None, repeat: int) -> None:
    with LocalServer(binary) as server:
        print(f"\n== {label}")
        held_figures(server.url, repeat)
        weight_figures(server.url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-server", action="store_true", help="also run on redis-server")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (best counts)")
    options = parser.parse_args()
    bench("embedded Valkey", None, options.repeat)
    if options.redis_server and (binary := shutil.which("redis-server")):
        bench("Debian redis-server", binary, options.repeat)


if __name__ == "__main__":
    main()
