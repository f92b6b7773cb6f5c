"""The Manager across processes: ``fairque storage-manager`` and ``fairque storage-worker``
processes share nothing but the storage's server (Tarantool, and the embedded Valkey).
The plan follows the queues' backlogs, the workers follow the plan, a killed worker drops
out of it and a new one joins it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairque.servers.embedded import LocalServer
from fairque.servers.local_tarantool import LocalTarantool
from fairque.storage import QueueReport, Storage, WorkerReport
from fairque.storage.connect import open_storage
from fairque.storage.contract import Contract
from tests.conftest import TARANTOOL, StartCli, wait_for

CONTRACT = "queues: [{id: 1, name: a, fields: {n: int}}, {id: 2, name: b, fields: {n: int}}]\n"

# Each task takes 20 ms of "work", so a backlog of a few hundred lasts for seconds.
HANDLERS = """
import asyncio
from fairque.runners.storage_worker import HandlerStats


async def handle(storage, tasks):
    await asyncio.sleep(0.02)
    await storage.done_task([task.task_id for task in tasks])
    return HandlerStats(processed=len(tasks))


HANDLERS = {"a": handle, "b": handle}
"""

WORKER = """
max_processors: 2
idle_wait: 0.05
heartbeat: 0.05
heartbeat_ttl: 1.0
queues: {1: {batch_size: 1}, 2: {batch_size: 1}}
"""


@pytest.fixture(params=["tarantool", "valkey"])
def storage_url(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "tarantool":
        if TARANTOOL is None:
            pytest.skip("no tarantool binary: apt-get install tarantool (.ci/run does)")
        with LocalTarantool(TARANTOOL) as started:
            yield started.url
    else:
        with LocalServer() as valkey:
            yield valkey.url


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "queues.yaml").write_text(CONTRACT)
    (tmp_path / "plan_handlers.py").write_text(HANDLERS)
    (tmp_path / "worker.yaml").write_text(WORKER)
    return tmp_path


def put(storage: Storage, files: Path, queue: str, count: int) -> None:
    contract = Contract.load(files / "queues.yaml").queue(queue)
    storage.put_tasks([contract.request({"n": n}) for n in range(count)])


def test_a_manager_steers_workers_in_other_processes(
    storage_url: str, files: Path, namespace: str, start_cli: StartCli
) -> None:
    storage = open_storage(storage_url, namespace)
    env = {"PYTHONPATH": str(files)}
    common = ["--storage", storage_url, "--namespace", namespace]

    def worker(name: str) -> subprocess.Popen[str]:
        return start_cli(
            "storage-worker", *common, "--contract", str(files / "queues.yaml"),
            "--handlers", "plan_handlers", "-c", str(files / "worker.yaml"),
            "--worker-id", name, env=env,
        )  # fmt: skip

    def following(plan: dict[str, list[int]]) -> bool:
        """The published plan is ``plan``, and every worker in it reports it follows it."""
        reports = {report.worker_id: report.plan for report in storage.workers()}
        return storage.read_plan() == plan and all(reports.get(w) == q for w, q in plan.items())

    manager = start_cli(
        "storage-manager", *common, "--interval", "0.05", env={**env, "PYTHONUNBUFFERED": "1"}
    )
    first, second = worker("first"), worker("second")
    wait_for(lambda: {r.worker_id for r in storage.workers()} == {"first", "second"}, 30)
    assert storage.read_plan() == {}  # no backlog: no instruction

    put(storage, files, "a", 600)
    wait_for(lambda: following({"first": [1, 1], "second": [1, 1]}), 30)
    put(storage, files, "b", 600)  # one processor of each worker moves to the new backlog
    wait_for(lambda: following({"first": [1, 2], "second": [1, 2]}), 30)
    wait_for(lambda: all(r.queues[2].handled > 0 for r in storage.workers()), 30)

    os.kill(second.pid, signal.SIGKILL)  # stops beating: out of the registry and the plan
    wait_for(lambda: set(storage.read_plan()) == {"first"}, 30)
    third = worker("third")
    wait_for(lambda: set(storage.read_plan()) == {"first", "third"}, 30)
    wait_for(lambda: all(report.plan for report in storage.workers()), 30)

    for process in (first, third, manager):
        process.send_signal(signal.SIGTERM)
    for process in (first, third, manager):
        assert process.wait(30) == 0
    storage.close()


def test_storage_manager_once_prints_the_plan(
    storage_url: str, files: Path, namespace: str
) -> None:
    with open_storage(storage_url, namespace) as storage:
        put(storage, files, "a", 30)
        storage.beat(WorkerReport("w", 3, {1: QueueReport(10)}), 60)
    command = [sys.executable, "-c", "from fairque.cli import main; main()", "storage-manager",
               "--storage", storage_url, "--namespace", namespace, "--once"]  # fmt: skip
    ran = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(ran.stdout) == {"w": [1, 1, 1]}
    with open_storage(storage_url, namespace) as storage:
        assert storage.read_plan() == {"w": [1, 1, 1]}
