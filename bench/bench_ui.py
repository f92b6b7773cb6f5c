"""What the Web UI's reads and its bulk action cost the server, on a throwaway Valkey.

    uv run python bench/bench_ui.py [--tenants 1000] [--tasks 100000]

Fills one namespace with --tasks queued tasks over --tenants tenants (and 10% of them
failed), then times, as the UI calls them: the overview (stats without the tenants'
fairness figures, and its server time alone; the full stats beside it), pages of the
busiest tenants, a task list page at the start and at the middle tenant of the queued
sequence, with and without a tenant, and requeueing every failed task of one tenant.
Prints median milliseconds per call; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable

from fairque import FairQueue, Task
from fairque.servers.embedded import LocalServer


def timed(call: Callable[[], object], repeat: int = 20) -> float:
    """Median milliseconds of ``call``."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        runs.append((time.perf_counter() - start) * 1000)
    return statistics.median(runs)


def server_ms(queue: FairQueue, fairness_top: int, repeat: int = 20) -> float:
    """Milliseconds of server time per ``stats`` call (the stats script alone runs)."""

    def usec() -> tuple[int, int]:
        entry = queue.redis.info("commandstats").get("cmdstat_fcall", {})
        return int(entry.get("usec", 0)), int(entry.get("calls", 0))

    queue.stats(fairness_top)  # loaded
    before, calls_before = usec()
    for _ in range(repeat):
        queue.stats(fairness_top)
    after, calls_after = usec()
    return (after - before) / (calls_after - calls_before) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=100_000)
    options = parser.parse_args()
    with LocalServer() as server, FairQueue(server.url, f"bench-{uuid.uuid4().hex[:8]}") as queue:
        for first in range(0, options.tasks, 1000):
            tenants = options.tenants
            queue.push_many(
                [
                    Task(user_id=f"t{n % tenants:05d}", priority=1 + n % 5, max_retries=0)
                    for n in range(first, min(first + 1000, options.tasks))
                ]
            )
        failed = 0
        while failed < options.tasks // 10:
            for task in queue.pop(count=1000):
                queue.fail(task, "bench")
                failed += 1
        states = {state.value: n for state, n in queue.stats().states.items() if n}
        print(f"{options.tasks:,} tasks over {options.tenants:,} tenants: {states}")
        deep = options.tenants // 2  # a page cursor is a tenant's rank * 2**31 + entries
        figures = {
            "overview (stats, as the UI polls it)": timed(lambda: queue.stats(fairness_top=0)),
            "stats with the fairness of the 20 busiest": timed(queue.stats),
            "busiest tenants, first page of 50": timed(queue.busiest_tenants),
            "busiest tenants, page of 50 at the middle": timed(
                lambda: queue.busiest_tenants(options.tenants // 2 // 50 * 50)
            ),
            "queued, first page of 25": timed(lambda: queue.tasks("queued", limit=25)),
            f"queued, page of 25 at the tenant ranked {deep:,}": timed(
                lambda: queue.tasks("queued", cursor=deep * 2**31, limit=25)
            ),
            "queued of one tenant, first page": timed(
                lambda: queue.tasks("queued", user_id="t00007", limit=25)
            ),
            "failed, first page of 25": timed(lambda: queue.tasks("failed", limit=25)),
            "failed of one tenant, page of 25 looked at": timed(
                lambda: queue.tasks("failed", user_id="t00007", limit=25)
            ),
        }
        for name, ms in figures.items():
            print(f"  {name:45} {ms:8.2f} ms")
        for label, top in (("overview", 0), ("stats with 20 tenants' fairness", 20)):
            ms = server_ms(queue, top)
            print(f"  {label}, server time per call (INFO commandstats): {ms:.3f} ms")
        tenant_failed = sum(1 for n in range(failed) if n % options.tenants == 7)
        start = time.perf_counter()
        requeued = queue.retry_failed("t00007")
        took = (time.perf_counter() - start) * 1000
        print(
            f"  requeue failed of one tenant ({requeued} of {failed:,} failed,"
            f" ~{tenant_failed} expected): {took:.1f} ms"
        )


if __name__ == "__main__":
    main()
