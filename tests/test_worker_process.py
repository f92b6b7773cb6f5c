"""Real worker processes (``fairque worker``): once each, SIGTERM, SIGKILL, bad config,
timeouts of sync functions on threads and in task processes, a second SIGINT."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fairque import FairQueue, Task, TaskState
from fairque.servers.embedded import LocalServer
from tests.conftest import StartCli, wait_for, waiting_workers

TASKS = '''
import asyncio
import os
import time
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


@task(name="overrun")
def overrun(path: str, seconds: float) -> None:
    """Notes its start and its end (with its pid), sleeping in between: its own work."""
    with open(path, "a") as out:
        out.write(f"start {os.getpid()}\\n")
    time.sleep(seconds)
    with open(path, "a") as out:
        out.write(f"end {os.getpid()}\\n")
'''

# A function a task process could not find by name: refused at start in process mode.
HIDDEN_TASKS = """
from fairque import task


def _register() -> None:
    @task(name="hidden")
    def hidden() -> None: ...


_register()
"""

Start = Callable[..., subprocess.Popen[str]]

# Signals, timeouts and task processes: the worker's own process handling, the same on
# every engine (what the engine does with a handed-back or expired lease is tested on each:
# here by the killed-worker tests, and in-process in test_worker.py).
PROCESS_HANDLING = pytest.mark.one_engine


@pytest.fixture
def start_worker(tmp_path: Path, server: LocalServer, namespace: str, start_cli: StartCli) -> Start:
    """Starts ``fairque worker`` processes (ended by ``start_cli`` if still running)."""
    (tmp_path / "demo_tasks.py").write_text(TASKS)
    (tmp_path / "hidden_tasks.py").write_text(HIDDEN_TASKS)

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


def read_stderr_until(process: subprocess.Popen[str], text: str, timeout: float = 30) -> str:
    """What the process wrote to stderr up to ``text`` (read from the pipe's descriptor,
    so the fixture's ``communicate`` still reads the rest)."""
    assert process.stderr is not None
    fd, seen = process.stderr.fileno(), b""
    deadline = time.monotonic() + timeout
    while text.encode() not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{text!r} not written within {timeout} s: {seen.decode()}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            assert chunk, f"the process ended without writing {text!r}: {seen.decode()}"
            seen += chunk
    return seen.decode()


def gone(pid: int) -> bool:
    """True once no process has this pid (killed and reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.cluster
def test_several_worker_processes_run_each_task_once(
    start_worker: Start, queue: FairQueue, tmp_path: Path
) -> None:
    out = tmp_path / "ran.txt"
    tasks = [Task(user_id=f"u{i % 5}", name="record", payload={"args": [str(out), i]})
             for i in range(120)]  # fmt: skip
    workers = [start_worker(WORKER_ID=f"proc-{n}") for n in range(3)]
    wait_for(lambda: waiting_workers(queue) == 3, timeout=30)
    queue.push_many(tasks)
    wait_for(lambda: queue.stats().counters.get("finished") == 120, timeout=30)
    assert sorted(int(line) for line in out.read_text().split()) == list(range(120))
    for worker in workers:
        worker.send_signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(timeout=15) == 0


@PROCESS_HANDLING
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


@PROCESS_HANDLING
def test_a_bad_configuration_stops_the_worker_with_the_field_named(start_worker: Start) -> None:
    worker = start_worker(CONCURRENCY="0")
    _, errors = worker.communicate(timeout=30)
    assert worker.returncode == 2
    assert "concurrency" in errors


@PROCESS_HANDLING
def test_processes_run_one_worker_each_and_stop_together(
    start_worker: Start, queue: FairQueue, tmp_path: Path
) -> None:
    out = tmp_path / "ran.txt"
    parent = start_worker("--processes", "2", WORKER_ID="pool")
    wait_for(lambda: waiting_workers(queue) == 2, timeout=60)
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
    wait_for(lambda: waiting_workers(queue) == 0, timeout=10)


@PROCESS_HANDLING
def test_a_sync_task_past_its_timeout_on_a_thread_never_runs_twice_at_once(
    start_worker: Start, queue: FairQueue, tmp_path: Path
) -> None:
    out = tmp_path / "runs.txt"
    task_id = queue.push(Task(user_id="u", name="overrun", payload={"args": [str(out), 1.5]},
                              max_retries=1))  # fmt: skip
    # The lease (1 s) is shorter than the run (1.5 s): only the heartbeat keeps it.
    worker = start_worker(TASK_TIMEOUT_SECONDS="0.3", LEASE_SECONDS="1")
    wait_for(lambda: state_of(queue, task_id) is TaskState.FAILED, timeout=60)
    info = queue.get(task_id)
    assert info is not None
    assert info.last_error == "timed out after 0.3 s"
    # Each run ended before the next began: the retry waited for the first thread.
    assert [line.split()[0] for line in out.read_text().splitlines()] == [
        "start", "end", "start", "end",
    ]  # fmt: skip
    assert "expired" not in queue.stats().counters
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0


@PROCESS_HANDLING
def test_process_mode_kills_a_run_at_its_timeout_and_retries_it(
    start_worker: Start, queue: FairQueue, tmp_path: Path
) -> None:
    out, ran = tmp_path / "runs.txt", tmp_path / "ran.txt"
    # The task's own timeout, not the worker's: the quick task keeps the default, so that
    # a loaded machine cannot time it out too (it did, with the worker's 0.3 s for all).
    task_id = queue.push(Task(user_id="u", name="overrun", payload={"args": [str(out), 60]},
                              max_retries=1, timeout=1.0))  # fmt: skip
    quick = queue.push(Task(user_id="u", name="record", payload={"args": [str(ran), 7]},
                            keep_result=True))  # fmt: skip
    worker = start_worker("--sync-runner", "process")
    wait_for(lambda: state_of(queue, task_id) is TaskState.FAILED, timeout=60)
    wait_for(lambda: state_of(queue, quick) is TaskState.FINISHED, timeout=60)
    info, quick_info = queue.get(task_id), queue.get(quick)
    assert info is not None
    assert quick_info is not None
    assert info.last_error == "timed out after 1 s"
    assert (quick_info.state, quick_info.result) == (TaskState.FINISHED, 7)
    # Run twice (max_retries=1), each in a task process killed at the timeout: the end of
    # a run never comes, and no process is left to write it.
    lines = out.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["start", "start"]
    pids = {int(line.split()[1]) for line in lines}
    assert len(pids) == 2
    assert worker.pid not in pids
    wait_for(lambda: all(gone(pid) for pid in pids), timeout=10)
    assert "end" not in out.read_text()
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0


@PROCESS_HANDLING
def test_process_mode_refuses_a_function_a_task_process_cannot_import(
    start_worker: Start,
) -> None:
    worker = start_worker("--tasks", "hidden_tasks", SYNC_RUNNER="process")
    _, errors = worker.communicate(timeout=60)
    assert worker.returncode == 2
    assert "'hidden'" in errors
    assert "cannot be imported by name in a task process" in errors
    assert "Traceback" not in errors


@PROCESS_HANDLING
def test_a_second_sigint_stops_at_once(
    start_worker: Start, queue: FairQueue, tmp_path: Path
) -> None:
    marker, out = tmp_path / "marker", tmp_path / "runs.txt"
    napping = queue.push(Task(user_id="u", name="nap_once", payload={"args": [str(marker)]}))
    blocking = queue.push(Task(user_id="v", name="overrun", payload={"args": [str(out), 60]}))
    worker = start_worker(GRACE_SECONDS="60", LEASE_SECONDS="60", CONCURRENCY="2")
    wait_for(lambda: marker.exists() and out.exists(), timeout=60)
    worker.send_signal(signal.SIGINT)
    read_stderr_until(worker, "a second signal stops at once")
    worker.send_signal(signal.SIGINT)
    # Without the second signal it would wait 60 s for its running tasks.
    assert worker.wait(timeout=15) == 0
    napped, blocked = queue.get(napping), queue.get(blocking)
    assert napped is not None
    assert blocked is not None
    assert (napped.state, napped.attempts) == (TaskState.QUEUED, 0)  # handed back
    # Its thread was still running: not handed back, its lease expires in its own time.
    assert blocked.state is TaskState.STARTED


@PROCESS_HANDLING
def test_process_mode_kills_a_run_at_shutdown_after_the_grace_and_hands_it_back(
    start_worker: Start, queue: FairQueue, tmp_path: Path
) -> None:
    out = tmp_path / "runs.txt"
    task_id = queue.push(Task(user_id="u", name="overrun", payload={"args": [str(out), 60]}))
    worker = start_worker(SYNC_RUNNER="process", GRACE_SECONDS="0.5", LEASE_SECONDS="60")
    wait_for(out.exists, timeout=60)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=15) == 0
    # The run was killed with its process, so the task could be handed back at once.
    info = queue.get(task_id)
    assert info is not None
    assert (info.state, info.attempts) == (TaskState.QUEUED, 0)
    [pid] = [int(line.split()[1]) for line in out.read_text().splitlines()]
    wait_for(lambda: gone(pid), timeout=10)


# A worker started as a script (`python main_worker.py`) whose function is in __main__.
MAIN_WORKER = """
import asyncio
import os
import sys

from fairque import AsyncFairQueue, Task, TaskState, task
from fairque.worker import Worker, WorkerConfig, registry


@task(name="whoami")
def whoami() -> int:
    return os.getpid()


async def main(url: str, namespace: str) -> None:
    queue = AsyncFairQueue(url, namespace)
    task_id = await queue.push(Task(user_id="u", name="whoami", keep_result=True))
    config = WorkerConfig(redis_url=url, namespace=namespace, sync_runner="process")
    worker = Worker(config, registry)
    run = asyncio.create_task(worker.run_async())
    for _ in range(600):  # bounded: 60 s
        info = await queue.get(task_id)
        if info is not None and info.state is TaskState.FINISHED:
            break
        await asyncio.sleep(0.1)
    worker.stop()
    await run
    await queue.close()
    print(os.getpid(), info.result if info else None)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@PROCESS_HANDLING
def test_process_mode_finds_functions_of_a_worker_script(
    server: LocalServer, namespace: str, tmp_path: Path
) -> None:
    script = tmp_path / "main_worker.py"
    script.write_text(MAIN_WORKER)
    done = subprocess.run([sys.executable, str(script), server.url, namespace],
                          capture_output=True, text=True, timeout=90, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    worker_pid, result = done.stdout.split()
    assert result not in ("None", worker_pid)  # ran in a task process, which loaded __main__


def test_a_killed_worker_gives_its_tenant_slot_back(
    start_worker: Start, queue: FairQueue, tmp_path: Path
) -> None:
    marker, out = tmp_path / "marker", tmp_path / "ran.txt"
    queue.set_tenant("u", concurrency=1)
    napping = queue.push(Task(user_id="u", name="nap_once", payload={"args": [str(marker)]}))
    waiting = queue.push(Task(user_id="u", name="record", payload={"args": [str(out), 1]}))
    victim = start_worker(LEASE_SECONDS="0.5", WORKER_ID="victim", CONCURRENCY="4")
    wait_for(marker.exists, timeout=30)
    # The victim has free slots, but the tenant's one slot is taken: the second waits.
    assert state_of(queue, waiting) is TaskState.QUEUED
    assert not queue.tenant("u").servable
    victim.kill()
    victim.wait(timeout=10)
    # Its lease expires (nobody finishes the nap): the slot comes back, both tasks run.
    start_worker(LEASE_SECONDS="0.5", WORKER_ID="rescuer")
    wait_for(lambda: state_of(queue, napping) is TaskState.FINISHED, timeout=30)
    wait_for(lambda: state_of(queue, waiting) is TaskState.FINISHED, timeout=30)
    assert queue.tenant("u").running == 0
