"""``fairque storage-worker``: a real process runs contract handlers, serves metrics, and
stops on SIGTERM after its current handler call; bad options are refused. And the
storage example runs as documented."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fairque.cli import app
from fairque.config import URL_ENV
from fairque.servers.embedded import LocalServer
from fairque.servers.local_tarantool import LocalTarantool
from fairque.storage import RedisStorage, Storage, TarantoolStorage
from fairque.storage.contract import Contract
from tests.conftest import wait_for

CONTRACT = "queues: [{id: 3, name: jobs, fields: {n: int}}]\n"

HANDLERS = """
from fairque.runners.storage_worker import HandlerStats


async def handle_jobs(storage, tasks):
    await storage.done_task([task.task_id for task in tasks if task.n >= 0])
    return HandlerStats(processed=sum(task.n >= 0 for task in tasks))


HANDLERS = {"jobs": handle_jobs}
NOT_A_MAPPING = 1
"""

runner = CliRunner()


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "queues.yaml").write_text(CONTRACT)
    (tmp_path / "job_handlers.py").write_text(HANDLERS)
    (tmp_path / "worker.yaml").write_text("max_processors: 2\nidle_wait: 0.05\n")
    return tmp_path


def _scrape(address: str) -> str:
    with urllib.request.urlopen(address, timeout=10) as response:
        text: str = response.read().decode()
        return text


def _run_worker(files: Path, storage: Storage, where: list[str]) -> None:
    """Runs ``fairque storage-worker`` on 20 tasks, reads its metrics, stops it."""
    jobs = Contract.load(files / "queues.yaml").queue("jobs")
    storage.put_tasks([jobs.request({"n": n}) for n in range(20)])
    command = [
        sys.executable, "-c", "from fairque.cli import main; main()", "storage-worker",
        "--contract", str(files / "queues.yaml"), "--handlers", "job_handlers:HANDLERS",
        "-c", str(files / "worker.yaml"), *where, "--metrics-port", "0", "--manager", "0.05",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(files)}
    worker = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert worker.stdout is not None
        address = worker.stdout.readline().split()[-1]
        wait_for(lambda: storage.get_stat().queues == {})
        # The worker counts a batch once its handler returned, just after the done_task.
        handled = 'queue_handled_tasks_total{outcome="processed",queue_num="3"} 20.0'
        text = wait_for(lambda: _scrape(address) if handled in _scrape(address) else "")
        assert "queue_running_job_processors 2.0" in text
        worker.send_signal(signal.SIGTERM)
        _, said = worker.communicate(timeout=30)  # start and stop lines go to stderr
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert worker.returncode == 0
    assert "fairque storage-worker: storage " in said
    assert "stopped after 20 processed task(s)" in said


def test_storage_worker_process(files: Path, server: LocalServer, namespace: str) -> None:
    with RedisStorage(server.url, namespace) as storage:
        _run_worker(files, storage, ["--url", server.url, "--namespace", namespace])


def test_storage_worker_process_on_tarantool(
    files: Path, tarantool_server: LocalTarantool, namespace: str
) -> None:
    url = tarantool_server.url
    with TarantoolStorage(url, namespace) as storage:
        _run_worker(files, storage, ["--storage", url, "--namespace", namespace])


def test_an_unreachable_tarantool_is_one_line(files: Path) -> None:
    arguments = ["storage-manager", "--storage", "tarantool://127.0.0.1:1", "--once"]
    result = runner.invoke(app, arguments)
    assert result.exit_code == 2
    [line] = result.output.splitlines()
    assert "cannot reach Tarantool at 127.0.0.1:1" in line
    result = runner.invoke(app, ["storage-manager", "--url", "redis://127.0.0.1:1/0", "--once"])
    assert result.exit_code == 2
    assert "storage unreachable" in result.output


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--handlers", "job_handlers:HANDLERS", "--contract", "absent.yaml"], "cannot read"),
        (["--handlers", "no_such_module"], "No module named"),
        (["--handlers", "job_handlers:MISSING"], "MISSING"),
        (["--handlers", "job_handlers:NOT_A_MAPPING"], "expected a mapping"),
        (["--handlers", "job_handlers:HANDLERS", "-c", "queues.yaml"], "queues"),
        (
            [
                "--handlers",
                "job_handlers",
                "--storage",
                "tarantool://h:port",
                "--metrics-port",
                "0",
            ],
            "bad port",
        ),
        (
            ["--handlers", "job_handlers:HANDLERS", "--storage", "tarantol://h:3301"],
            "must start with one of tarantool://, redis://",
        ),
    ],
)
def test_storage_worker_refuses_bad_options(
    files: Path, monkeypatch: pytest.MonkeyPatch, options: list[str], words: str
) -> None:
    monkeypatch.chdir(files)
    monkeypatch.syspath_prepend(str(files))
    arguments = ["storage-worker", "--contract", "queues.yaml", *options]
    result = runner.invoke(app, arguments)
    assert result.exit_code == 2
    assert words in result.output


def test_storage_worker_refuses_a_handler_for_an_unknown_queue(
    files: Path, server: LocalServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (files / "other.yaml").write_text("queues: [{id: 9, name: other}]\n")
    monkeypatch.chdir(files)
    monkeypatch.syspath_prepend(str(files))
    arguments = ["storage-worker", "--contract", "other.yaml", "--handlers", "job_handlers",
                 "--url", server.url, "--namespace", namespace]  # fmt: skip
    result = runner.invoke(app, arguments)
    assert result.exit_code == 2
    assert "no queue 'jobs'" in result.output


@pytest.mark.parametrize("options", [[], ["--redis"], ["--storage"]])
def test_the_storage_example_runs(
    server: LocalServer, request: pytest.FixtureRequest, options: list[str]
) -> None:
    example = Path(__file__).parent.parent / "examples" / "storage_emails.py"
    env = {**os.environ, URL_ENV: server.url}
    if options == ["--storage"]:
        tarantool_server: LocalTarantool = request.getfixturevalue("tarantool_server")
        options = ["--storage", tarantool_server.url]
    command = [sys.executable, str(example), *options]
    ran = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=True)
    assert "emails: processed 30, retried 3" in ran.stdout
    assert "sms: processed 10, retried 0" in ran.stdout
