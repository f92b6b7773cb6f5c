"""What a queued task costs the server, and what a namespace keeps after its work is done:
worker processes alone (no reap() call anywhere) drain tasks whose records live one
second, then the server's memory is read.

    uv run python bench/bench_memory.py [--tasks 1000000] [--processes 2] [--queued 100000]

Prints, never asserts: the server's used memory per queued task (``--queued`` named
tasks with a small payload over 50 tenants, pushed in batches of 10,000, on a server of
their own); the used memory before the drained tasks were pushed and once maintenance
has dropped every expired task, the difference per processed task, and what is left in
the namespace. Throwaway embedded Valkeys; ``fairque worker`` processes.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from fairque import FairQueue, QueueSettings, Task
from fairque.servers.embedded import LocalServer

BENCH = Path(__file__).parent
NAMESPACE = "memory"


def used_memory(queue: FairQueue) -> int:
    return int(queue.redis.info("memory")["used_memory"])


def wait(probe: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not probe():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(f"benchmark condition not met: {what}")
        time.sleep(0.2)


def queued_bytes(tasks: int) -> float:
    """Server memory per queued task, on a server of its own."""
    with LocalServer() as server, FairQueue(server.url, "queued") as queue:
        queue.push_many([Task(user_id="warm-up", name="send_email")])
        before = used_memory(queue)
        for first in range(0, tasks, 10_000):
            batch = range(first, min(first + 10_000, tasks))
            queue.push_many(
                [Task(user_id=f"t{i % 50}", name="send_email", payload={"n": i}) for i in batch]
            )
        return (used_memory(queue) - before) / tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--queued", type=int, default=100_000)
    options = parser.parse_args()
    print(f"{options.queued:,} queued tasks over 50 tenants: "
          f"{queued_bytes(options.queued):.0f} bytes of server memory each")  # fmt: skip
    settings = QueueSettings(finished_ttl=1, failed_ttl=1)
    with LocalServer() as server, FairQueue(server.url, NAMESPACE, settings=settings) as queue:
        env = {**os.environ, "PYTHONPATH": str(BENCH), "FAIRQUE_REDIS_URL": server.url,
               "FAIRQUE_NAMESPACE": NAMESPACE, "FAIRQUE_CONCURRENCY": "200"}  # fmt: skip
        command = [sys.executable, "-c", "from fairque.cli import main; main()", "worker",
                   "--tasks", "bench_tasks", "--processes", str(options.processes)]  # fmt: skip
        worker = subprocess.Popen(command, env=env, stderr=subprocess.DEVNULL)
        ended = [queue.namespace.key(f"state:{s}") for s in ("finished", "failed", "canceled")]

        def run(tasks: int, done_before: int) -> None:
            for first in range(0, tasks, 1000):
                batch = range(first, min(first + 1000, tasks))
                queue.push_many([Task(user_id=f"t{i % 100}", name="noop") for i in batch])
            total = done_before + tasks
            wait(lambda: queue.stats().counters.get("finished", 0) >= total, 3600, "finished")

        def tidy() -> None:  # maintenance by the workers drops the expired records
            wait(lambda: sum(queue.redis.zcard(key) for key in ended) == 0, 600, "registries")

        try:
            wait(queue.workers, 120, "the workers registered")
            # A warm-up run: scripts loaded, connections and counters made, before "before".
            run(1000, 0)
            tidy()
            before = used_memory(queue)
            started = time.perf_counter()
            run(options.tasks, 1000)
            drained = time.perf_counter() - started
            tidy()
            tidied = time.perf_counter() - started - drained
            after = used_memory(queue)
            keys = sorted(key.decode() for key in queue.redis.scan_iter(f"fq:{{{NAMESPACE}}}:*"))
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(timeout=60)
    print(f"{options.tasks:,} tasks with 1 s TTLs, {options.processes} worker processes, no "
          f"reap() call: drained in {drained:.1f} s, registries empty {tidied:.1f} s "
          "later")  # fmt: skip
    print(f"server memory: {before:,} bytes before, {after:,} after: "
          f"{(after - before) / options.tasks:.3f} bytes per processed task")  # fmt: skip
    print(f"keys left in the namespace ({len(keys)}): {', '.join(keys)}")


if __name__ == "__main__":
    main()
