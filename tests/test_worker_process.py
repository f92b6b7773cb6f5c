"""Real worker processes (``fairque worker``): once each, SIGTERM, SIGKILL, bad config."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from fairque import FairQueue, Task, TaskState
from fairque.engine.embedded import LocalServer
from tests.conftest import StartCli, wait_for, wake_listeners

TASKS = '''
import asyncio
import os
from pathlib import Path

from fairque import task


@task(name="record")
def record(path: str, value: int) -> int:
    with open(path, "a") as out:
        out.write(f"{value}\\n")
    return value


@task(name="nap_once")
async def nap_once(marker: str) -> str:
    """The first run marks the file and naps (to be stopped or killed); later runs return."""
    if not os.path.exists(marker):
        Path(marker).write_text("started")
        await asyncio.sleep(60)
    return "done"
'''

Start = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def start_worker(tmp_path: Path, server: LocalServer, namespace: str, start_cli: StartCli) -> Start:
    """Starts ``fairque worker`` processes (ended by ``start_cli`` if still running)."""
    (tmp_path / "demo_tasks.py").write_text(TASKS)

    def start(*options: str, **settings: str) -> subprocess.Popen[str]:
        env = {
            "PYTHONPATH": str(tmp_path),
            "FAIRQUE_REDIS_URL": server.url,
            "FAIRQUE_NAMESPACE": namespace,
            "FAIRQUE_POLL_INTERVAL_SECONDS": "0.2",
            **{f"FAIRQUE_{name.upper()}": value for name, value in settings.items()},
        }
        return start_cli("worker", "--tasks", "demo_tasks", *options, env=env)

    return start


def state_of(queue: FairQueue, task_id: str) -> TaskState | None:
    info = queue.get(task_id)
    return None if info is None else info.state


@pytest.mark.cluster
def test_several_worker_processes_run_each_task_once(
    start_worker: Start, queue: FairQueue, tmp_path: Path
) -> None:
    out = tmp_path / "ran.txt"
    tasks = [Task(user_id=f"u{i % 5}", name="record", payload={"args": [str(out), i]})
             for i in range(120)]  # fmt: skip
    workers = [start_worker(WORKER_ID=f"proc-{n}") for n in range(3)]
    wait_for(lambda: wake_listeners(queue) == 3, timeout=30)
    queue.push_many(tasks)
    wait_for(lambda: queue.stats().counters.get("finished") == 120, timeout=30)
    assert sorted(int(line) for line in out.read_text().split()) == list(range(120))
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(timeout=15) == 0


def test_sigterm_hands_running_tasks_back_at_once(
    start_worker: Start, queue: FairQueue, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    task_id = queue.push(Task(user_id="u", name="nap_once", payload={"args": [str(marker)]}))
    worker = start_worker(LEASE_SECONDS="60", GRACE_SECONDS="0.2")
    wait_for(marker.exists, timeout=30)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0
    info = queue.get(task_id)
    assert info is not None
    assert (info.state, info.attempts) == (TaskState.QUEUED, 0)  # not after the 60 s lease


def test_a_killed_worker_loses_nothing(
    start_worker: Start, queue: FairQueue, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    task_id = queue.push(Task(user_id="u", name="nap_once", payload={"args": [str(marker)]},
                              keep_result=True))  # fmt: skip
    victim = start_worker(LEASE_SECONDS="0.5", WORKER_ID="victim")
    wait_for(marker.exists, timeout=30)
    victim.kill()
    victim.wait(timeout=10)
    start_worker(LEASE_SECONDS="0.5", WORKER_ID="rescuer")
    wait_for(lambda: state_of(queue, task_id) is TaskState.FINISHED, timeout=30)
    info = queue.get(task_id)
    assert info is not None
    assert (info.result, info.attempts, info.worker_id) == ("done", 1, "rescuer")
    assert info.last_error == "lease expired"


def test_a_bad_configuration_stops_the_worker_with_the_field_named(start_worker: Start) -> None:
    worker = start_worker(CONCURRENCY="0")
    _, errors = worker.communicate(timeout=30)
    assert worker.returncode == 2
    assert "concurrency" in errors


def test_processes_run_one_worker_each_and_stop_together(
    start_worker: Start, queue: FairQueue, tmp_path: Path
) -> None:
    out = tmp_path / "ran.txt"
    parent = start_worker("--processes", "2", WORKER_ID="pool")
    wait_for(lambda: wake_listeners(queue) == 2, timeout=60)
    ids = queue.push_many([Task(user_id="u", name="record", payload={"args": [str(out), i]},
                                keep_result=True) for i in range(40)])  # fmt: skip
    wait_for(lambda: queue.stats().counters.get("finished") == 40, timeout=30)
    ran_on = set()
    for task_id in ids:
        info = queue.get(task_id)
        assert info is not None
        ran_on.add(info.worker_id)
    assert ran_on <= {"pool-1", "pool-2"}
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=30) == 0
    wait_for(lambda: wake_listeners(queue) == 0, timeout=10)
