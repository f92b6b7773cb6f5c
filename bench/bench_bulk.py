"""A bulk retry of many failed tasks on a throwaway embedded Valkey: how long it takes,
and the longest call the server ran meanwhile (its SLOWLOG, which logs every command).

    uv run python bench/bench_bulk.py [--tasks 100000] [--tenants 100] [--batch 200]

The failed tasks are made quickly with the public API: pushed with max_retries=0, leased
for a millisecond, and failed by maintenance when their leases expire (``reap``), a
thousand per call, instead of a worker failing them one by one. Then the same
operation the CLI runs (``fairque bulk retry``): a dry run that counts, and the retry,
batch after batch. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import time

from fairque import FairQueue, Task, TaskState
from fairque.queue import BulkAction, Selector
from fairque.queue.calls.bulk import BULK_BATCH
from fairque.servers.embedded import LocalServer


def make_failed(queue: FairQueue, tasks: int, tenants: int) -> None:
    for first in range(0, tasks, 1000):
        queue.push_many([
            Task(user_id=f"tenant-{n % tenants}", name="report", max_retries=0)
            for n in range(first, min(first + 1000, tasks))
        ])  # fmt: skip
    leased = 0
    while leased < tasks:
        leased += len(queue.pop(count=1000, lease_seconds=0.001))
    time.sleep(0.01)  # the leases expire: a bench may wait, a test may not
    while queue.stats().states[TaskState.STARTED]:
        queue.reap(limit=1000)


def run(queue: FairQueue, selector: Selector, batch: int, *, dry_run: bool) -> tuple[int, int]:
    """Every batch of a bulk retry: (tasks selected, calls)."""
    selected = calls = 0
    cursor: str | None = ""
    while cursor is not None:
        done = queue.bulk(BulkAction.RETRY, selector, cursor, dry_run=dry_run, batch=batch)
        selected, calls, cursor = selected + done.selected, calls + 1, done.cursor
    return selected, calls


def longest_call(queue: FairQueue, after: int) -> tuple[float, float, int]:
    """The longest and the median script call in the SLOWLOG (us) logged after entry
    ``after``, and the newest entry's id. (The log is emptied once only: the command after
    a SLOWLOG RESET of many entries took ~100 ms more, the freeing's cost, not its own;
    and reading the log is the longest command of all.)"""
    entries = [entry for entry in queue.redis.slowlog_get(1_000_000) if entry["id"] > after]
    calls = [entry for entry in entries if _text(entry["command"]).startswith("FCALL")]
    durations = sorted(float(entry["duration"]) for entry in calls)
    newest = max(entry["id"] for entry in entries)
    return durations[-1], durations[len(durations) // 2], newest


def _text(command: bytes | str) -> str:
    return command.decode() if isinstance(command, bytes) else command


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--batch", type=int, default=BULK_BATCH)
    options = parser.parse_args()
    with LocalServer() as server:
        queue = FairQueue(server.url, "bench-bulk")
        started = time.perf_counter()
        make_failed(queue, options.tasks, options.tenants)
        failed = queue.stats().states[TaskState.FAILED]
        print(f"{failed:,} failed tasks made in {time.perf_counter() - started:.1f} s")

        redis = queue.redis
        redis.config_set("slowlog-log-slower-than", 0)  # every command
        redis.config_set("slowlog-max-len", 1_000_000)
        redis.slowlog_reset()
        seen = -1
        for dry_run, verb in ((True, "counted"), (False, "retried")):
            started = time.perf_counter()
            selected, calls = run(queue, Selector(), options.batch, dry_run=dry_run)
            took = time.perf_counter() - started
            longest, median, seen = longest_call(queue, seen)
            print(
                f"{verb} {selected:,} tasks in {took:.2f} s ({selected / took:,.0f}/s), "
                f"{calls} calls of {options.batch}; server time per call: longest "
                f"{longest / 1000:.2f} ms, median {median / 1000:.2f} ms"
            )
        queued = queue.stats().states[TaskState.QUEUED]
        print(f"queued now: {queued:,}; failed: {queue.stats().states[TaskState.FAILED]:,}")
        queue.close()


if __name__ == "__main__":
    main()
