"""Rolling restarts: the workers of a drain are restarted one by one (SIGTERM, then a new
process in its place, as a deployment does) while the drain runs; every task finishes
exactly once, and no lease expires (a stopped worker finishes what it runs within its
grace period, so nothing waits for a lease to run out)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from fairque import FairQueue, Task, TaskState
from tests.conftest import Server, wait_for

pytestmark = [pytest.mark.one_engine, pytest.mark.long]
CLI = [sys.executable, "-c", "from fairque.cli import main; main()"]
TASKS = textwrap.dedent("""
    import os
    import time

    import redis

    from fairque import task

    runs = redis.Redis.from_url(os.environ["RUNS_URL"])


    @task(name="work")
    def work(n: int) -> None:
        runs.hincrby("runs", str(n), 1)
        time.sleep(0.05)
""")
WORKERS = 3
COUNT = 600


class Worker:
    def __init__(self, url: str, namespace: str, home: Path, number: int) -> None:
        self.log = home / f"worker-{number}.txt"
        args = ["worker", "--tasks", "tasks", "--url", url, "--namespace", namespace,
                "--concurrency", "4"]  # fmt: skip
        env = {**os.environ, "RUNS_URL": url}
        with self.log.open("w") as said:
            self.process = subprocess.Popen([*CLI, *args], cwd=home, env=env, stdout=said,
                                            stderr=said)  # fmt: skip

    def started(self) -> bool:
        return " started (concurrency" in self.log.read_text()

    def stop(self) -> str:
        """SIGTERM; its log if it did not stop cleanly, else ''."""
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=60)
        return "" if code == 0 else f"exit {code}: {self.log.read_text()}"


def ran_more(runs: redis.Redis) -> Callable[[], bool]:
    """Whether more tasks ran than now."""
    done = runs.hlen("runs")
    return lambda: runs.hlen("runs") > done


def test_workers_restarted_one_by_one_during_a_drain_lose_and_repeat_nothing(
    server: Server, namespace: str, tmp_path: Path
) -> None:
    (tmp_path / "tasks.py").write_text(TASKS)
    runs = redis.Redis.from_url(server.url)
    with FairQueue(server.url, namespace) as queue:
        tasks = [
            Task(user_id=f"t{n % 5}", name="work", payload={"args": [n]}) for n in range(COUNT)
        ]
        for first in range(0, COUNT, 200):
            queue.push_many(tasks[first : first + 200])
        workers = [Worker(server.url, namespace, tmp_path, n) for n in range(WORKERS)]
        started = WORKERS
        try:
            for position in range(WORKERS):  # a rolling restart: each worker, one at a time
                wait_for(workers[position].started, timeout=60)
                wait_for(ran_more(runs), timeout=60)  # the drain goes on meanwhile
                assert workers[position].stop() == ""
                workers[position] = Worker(server.url, namespace, tmp_path, started)
                started += 1
            wait_for(lambda: queue.stats().states[TaskState.FINISHED] == COUNT, timeout=180)
            stats = queue.stats()
        finally:
            stopped = [worker.stop() for worker in workers]
    assert stopped == [""] * WORKERS
    assert stats.states[TaskState.FAILED] == 0
    assert stats.counters.get("expired", 0) == 0  # no lease ran out
    assert stats.counters.get("retried", 0) == 0
    counts = {int(n): int(count) for n, count in runs.hgetall("runs").items()}
    assert counts == dict.fromkeys(range(COUNT), 1)  # every task once: none lost, none twice
    runs.close()
