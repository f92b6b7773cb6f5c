"""Engine throughput on a throwaway server: push and pop+finish, tasks per second.

    uv run python bench/bench_engine.py [--redis-server] [--repeat 3]

Prints figures (best of --repeat runs; this machine's timings vary from run to run),
with the server's time per task in script calls (``INFO commandstats``); asserts
nothing. Tasks are named (a worker runs a task by its name) and spread over 50 tenants
with a small payload, and building the Task objects is part of what is timed: that is
what a producer pays.
"""

from __future__ import annotations

import argparse
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from fairque import FairQueue, Task
from fairque.servers.embedded import LocalServer

TENANTS = 50


@dataclass(frozen=True)
class Scenario:
    name: str
    tasks: int
    threads: int
    run: Callable[[FairQueue, int], None]  # (queue, tasks for this thread)
    prefill: bool  # push the tasks before timing (for pop scenarios)


def make_task(i: int) -> Task:
    return Task(user_id=f"tenant-{i % TENANTS}", name="send_email", payload={"n": i})


def make_tasks(count: int) -> list[Task]:
    return [make_task(i) for i in range(count)]


def push_one_by_one(queue: FairQueue, count: int) -> None:
    for i in range(count):
        queue.push(make_task(i))


def push_batches(queue: FairQueue, count: int) -> None:
    for _ in range(count // 1000):
        queue.push_many(make_tasks(1000))


def pop_finish(batch: int) -> Callable[[FairQueue, int], None]:
    def drain(queue: FairQueue, count: int) -> None:
        done = 0
        while done < count and (leased := queue.pop(count=batch)):
            if batch == 1:
                queue.finish(leased[0])
            else:
                queue.finish_many(leased)
            done += len(leased)

    return drain


SCENARIOS = [
    Scenario("push, one at a time", 5_000, 1, push_one_by_one, prefill=False),
    Scenario("push, batches of 1,000", 100_000, 1, push_batches, prefill=False),
    Scenario("push, batches of 1,000, 2 threads", 100_000, 2, push_batches, prefill=False),
    Scenario("pop+finish, count 1", 5_000, 1, pop_finish(1), prefill=True),
    Scenario("pop+finish, count 100", 100_000, 1, pop_finish(100), prefill=True),
    Scenario("pop+finish, count 100, 2 threads", 100_000, 2, pop_finish(100), prefill=True),
]


def script_usec(queue: FairQueue) -> int:
    """Microseconds the server has spent in script calls (EVALSHA, EVAL, FCALL), from
    ``INFO commandstats``: the commands a script makes are inside its time (and counted
    again under their own names, so those are left out)."""
    stats = queue.redis.info("commandstats")
    return sum(
        int(entry["usec"])
        for name, entry in stats.items()
        if name.startswith(("cmdstat_eval", "cmdstat_fcall"))
    )


def measure(url: str, scenario: Scenario) -> tuple[float, float]:
    """Seconds for one run of ``scenario`` in a fresh namespace, and the server's
    microseconds per task in it."""
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    queues = [FairQueue(url, namespace) for _ in range(scenario.threads)]
    if scenario.prefill:
        push_batches(queues[0], scenario.tasks)
    share = scenario.tasks // scenario.threads
    threads = [threading.Thread(target=scenario.run, args=(q, share)) for q in queues]
    server_before = script_usec(queues[0])
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    server = (script_usec(queues[0]) - server_before) / scenario.tasks
    queues[0].redis.flushdb()  # a throwaway server: keep every run's keyspace alike
    for queue in queues:
        queue.close()
    return elapsed, server


def bench(label: str, binary: str | None, repeat: int) -> None:
    with LocalServer(binary) as server:
        version = server_version(server.url)
        print(f"\n{label} ({version}), best of {repeat}")
        print(f"{'scenario':<36} {'tasks':>8} {'seconds':>8} {'tasks/s':>10} {'server us':>10}")
        server_us: dict[str, float] = {}
        for scenario in SCENARIOS:
            runs = [measure(server.url, scenario) for _ in range(repeat)]
            best = min(seconds for seconds, _ in runs)
            server_us[scenario.name] = min(us for _, us in runs)
            rate = scenario.tasks / best
            print(
                f"{scenario.name:<36} {scenario.tasks:>8,} {best:>8.2f} {rate:>10,.0f}"
                f" {server_us[scenario.name]:>10.1f}"
            )
        for pop in ("pop+finish, count 100", "pop+finish, count 1"):
            total = server_us["push, batches of 1,000"] + server_us[pop]
            print(f"server time per task, push (batches of 1,000) + {pop}: {total:.1f} us")


def server_version(url: str) -> str:
    queue = FairQueue(url, "bench-info")
    info = queue.redis.info("server")
    queue.close()
    name = "valkey" if "valkey_version" in info else "redis"
    return f"{name} {info.get('valkey_version', info['redis_version'])}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-server", action="store_true", help="also run on redis-server")
    parser.add_argument("--repeat", type=int, default=3, help="runs per scenario (best counts)")
    options = parser.parse_args()
    bench("embedded Valkey", None, options.repeat)
    if options.redis_server and (binary := shutil.which("redis-server")):
        bench("Debian redis-server", binary, options.repeat)


if __name__ == "__main__":
    main()
