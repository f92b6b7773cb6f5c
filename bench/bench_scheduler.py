"""Scheduler throughput and latency on a throwaway server.

    uv run python bench/bench_scheduler.py [--schedules 2000] [--instances 1 3]

Adds N interval schedules whose first runs all come due at the same moment, starts the
given number of scheduler instances (asyncio tasks in this process, each with its own
connection pool, as separate processes would have), and prints how fast the runs were
submitted and the submission latency (due time to queued, server clock). Asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from datetime import datetime, timedelta, timezone

from fairque import AsyncFairQueue
from fairque.runners.scheduler import AsyncTaskScheduler
from fairque.scheduler import SchedulerConfig
from fairque.servers.embedded import LocalServer

SCHEDULES_ADDED_PER_SECOND = 250  # a cautious rate, so all are added before their first run


async def measure(url: str, schedules: int, instances: int) -> None:
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    config = SchedulerConfig(poll_interval=0.5)
    admin = AsyncTaskScheduler(url, namespace, config=config)
    queue = AsyncFairQueue(namespace=namespace, executor=admin.executor)
    runners = [AsyncTaskScheduler(url, namespace, config=config) for _ in range(instances)]
    tasks = [asyncio.create_task(runner.run()) for runner in runners]  # idle until the runs
    lead = 1 + schedules / SCHEDULES_ADDED_PER_SECOND
    due = datetime.now(timezone.utc) + timedelta(seconds=lead)
    for n in range(schedules):
        await admin.add_schedule(
            interval=3600, start_at=due, task={"name": "tick", "user_id": f"tenant-{n % 50}"}
        )
    if time.time() > due.timestamp():
        print(f"adding the schedules took longer than {lead:.1f} s: latencies include that")
    while (await queue.stats()).counters.get("pushed", 0) < schedules:
        await asyncio.sleep(0.01)  # a benchmark's progress poll, not a test
    finished = time.time()
    for runner in runners:
        runner.stop()
    await asyncio.gather(*tasks)
    latencies = sorted(x for runner in runners for x in runner.metrics.latency)
    locks = sorted(x for runner in runners for x in runner.metrics.lock_time)
    span = finished - due.timestamp()
    shares = [runner.metrics.submitted for runner in runners]
    print(
        f"{instances} instance(s), {schedules} runs due at once: all queued {span:.2f} s "
        f"after their due time ({schedules / span:,.0f} runs/s); latency p50 "
        f"{latencies[len(latencies) // 2] * 1000:.0f} ms, p99 "
        f"{latencies[int(len(latencies) * 0.99)] * 1000:.0f} ms; claim round trip p50 "
        f"{statistics.median(locks) * 1000:.2f} ms; lock busy "
        f"{sum(r.metrics.lock_busy for r in runners)}; runs per instance {shares}"
    )
    for runner in [admin, *runners]:
        await runner.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--schedules", type=int, default=2000)
    parser.add_argument("--instances", type=int, nargs="+", default=[1, 3])
    options = parser.parse_args()
    with LocalServer() as server:
        for instances in options.instances:
            asyncio.run(measure(server.url, options.schedules, instances))


if __name__ == "__main__":
    main()
