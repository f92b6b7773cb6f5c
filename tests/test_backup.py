"""Backups: a snapshot of the server taken in the middle of a drain (``BGSAVE``, as the
docs say) restores into a new server, where workers finish the namespace with no task
lost. What the snapshot could not know comes back as the docs say: tasks that were
running come back when their lease expires, and tasks that finished after the snapshot
run again (at least once, never lost)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from fairque import FairQueue, Task, TaskState
from fairque.servers.embedded import LocalServer
from tests.conftest import wait_for

pytestmark = [pytest.mark.one_engine, pytest.mark.long]
CLI = [sys.executable, "-c", "from fairque.cli import main; main()"]
TASKS = textwrap.dedent("""
    import os
    import time

    from fairque import task


    @task(name="work")
    def work(n: int) -> None:
        time.sleep(0.02)
        with open(os.environ["RUNS_FILE"], "a") as runs:  # one short append: whole lines
            runs.write(f"{n}\\n")
""")
COUNT = 400
LEASE = 2.0  # seconds: the leases the snapshot holds expire soon after the restore


def drain(url: str, namespace: str, home: Path) -> subprocess.Popen[bytes]:
    args = ["worker", "--tasks", "tasks", "--url", url, "--namespace", namespace,
            "--concurrency", "4"]  # fmt: skip
    env = {**os.environ, "RUNS_FILE": str(home / "runs.txt"), "FAIRQUE_LEASE_SECONDS": str(LEASE)}
    with (home / "worker.txt").open("a") as said:
        return subprocess.Popen([*CLI, *args], cwd=home, env=env, stdout=said, stderr=said)


def runs(home: Path) -> Counter[int]:
    path = home / "runs.txt"
    return Counter(int(line) for line in path.read_text().split()) if path.exists() else Counter()


def snapshot(client: Any, into: Path) -> None:
    """``BGSAVE``, waits until it is written, copies the file: the documented backup."""
    before = client.lastsave()
    client.bgsave()
    wait_for(lambda: client.lastsave() != before, timeout=60)
    folder, name = client.config_get("dir")["dir"], client.config_get("dbfilename")["dbfilename"]
    shutil.copy(Path(str(folder)) / str(name), into)


def test_a_snapshot_taken_mid_drain_restores_and_finishes_with_nothing_lost(
    tmp_path: Path, namespace: str
) -> None:
    (tmp_path / "tasks.py").write_text(TASKS)
    backup = tmp_path / "backup.rdb"
    with LocalServer() as first:
        with FairQueue(first.url, namespace) as queue:
            queue.push_many([Task(user_id=f"t{n % 4}", name="work", payload={"args": [n]})
                             for n in range(COUNT)])  # fmt: skip
            worker = drain(first.url, namespace, tmp_path)
            try:
                wait_for(lambda: len(runs(tmp_path)) >= COUNT // 3, timeout=120)
                snapshot(queue.redis, backup)  # in the middle: some done, some running
            finally:
                worker.send_signal(signal.SIGTERM)
                assert worker.wait(timeout=60) == 0
        ran_before = runs(tmp_path)
    restored = LocalServer()
    shutil.copy(backup, restored.folder / "dump.rdb")
    with restored, FairQueue(restored.url, namespace) as queue:
        in_backup = queue.stats()
        finished_in_backup = in_backup.states[TaskState.FINISHED]
        assert 0 < finished_in_backup < COUNT
        worker = drain(restored.url, namespace, tmp_path)
        try:
            wait_for(lambda: queue.stats().states[TaskState.FINISHED] == COUNT, timeout=180)
        finally:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=60) == 0
        after = queue.stats()
    assert after.states[TaskState.FAILED] == after.states[TaskState.QUEUED] == 0
    every_run = runs(tmp_path)
    assert set(every_run) == set(range(COUNT))  # none lost
    # Ran again: each task that ran before but had not finished in the snapshot (it was
    # queued or running there), once more; what had finished there, never.
    again = {n for n, times in every_run.items() if times > 1}
    assert again <= set(ran_before)
    assert len(again) == len(ran_before) - finished_in_backup
    assert max(every_run.values()) == 2
    assert after.counters.get("expired", 0) == in_backup.states[TaskState.STARTED]
