"""Log lines as text or as one JSON object per line (``--log-format json``): every line a
long-running command writes on stderr, its children's too, with the task's id, tenant,
name and attempt where a line concerns a task."""

from __future__ import annotations

import json
import logging
import signal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from fairque import FairQueue, Task
from fairque.cli import app
from fairque.logs import JsonLines, TextLines
from fairque.servers.embedded import LocalServer
from tests.conftest import StartCli, wait_for, waiting_workers

TASKS = """
from fairque import task


@task(name="explode")
def explode() -> None:
    raise ValueError("boom")
"""


def record(**extra: Any) -> logging.LogRecord:
    made = logging.LogRecord("fairque.worker", logging.WARNING, __file__, 1, "task %s failed",
                             ("t1",), None)  # fmt: skip
    made.__dict__.update(extra)
    return made


def test_a_json_line_carries_the_task_fields_where_there_are_some() -> None:
    fields = {"task_id": "t1", "tenant": "alice", "task_name": "explode", "attempt": 2}
    line = json.loads(JsonLines().format(record(**fields)))
    assert line.pop("time").endswith("+00:00")
    assert line == {"level": "warning", "logger": "fairque.worker",
                    "message": "task t1 failed", "task_id": "t1", "tenant": "alice",
                    "name": "explode", "attempt": 2}  # fmt: skip
    assert set(json.loads(JsonLines().format(record()))) == {"time", "level", "logger", "message"}
    failing = record(exc_info=(ValueError, ValueError("boom"), None))
    assert "ValueError: boom" in json.loads(JsonLines().format(failing))["traceback"]
    assert TextLines().format(record()) == "warning: task t1 failed"


@pytest.mark.parametrize("processes", ["1", "2"])
def test_a_worker_writes_every_line_as_json(
    start_cli: StartCli, server: LocalServer, namespace: str, tmp_path: Path, processes: str
) -> None:
    (tmp_path / "exploding.py").write_text(TASKS)
    env = {"PYTHONPATH": str(tmp_path), "FAIRQUE_REDIS_URL": server.url,
           "FAIRQUE_NAMESPACE": namespace, "FAIRQUE_LOG_FORMAT": "json"}  # fmt: skip
    worker = start_cli("worker", "--tasks", "exploding", "--processes", processes, env=env)
    with FairQueue(server.url, namespace) as queue:
        wait_for(lambda: waiting_workers(queue) == int(processes), timeout=60)
        task_id = queue.push(Task(user_id="alice", name="explode", max_retries=0))
        wait_for(lambda: queue.stats().counters.get("failed") == 1, timeout=30)
    worker.send_signal(signal.SIGTERM)
    _, said = worker.communicate(timeout=30)
    assert worker.returncode == 0
    lines = [json.loads(line) for line in said.splitlines()]  # every line is JSON
    assert lines[0]["message"].startswith("fairque worker: ")
    assert lines[-1]["message"].startswith("fairque worker: stopped")
    [failed] = [line for line in lines if line.get("task_id") == task_id]
    assert failed["message"] == f"task {task_id} failed: ValueError: boom"
    assert (failed["level"], failed["tenant"], failed["name"], failed["attempt"]) == (
        "warning", "alice", "explode", 1,
    )  # fmt: skip


def test_an_unknown_log_format_is_one_line() -> None:
    result = CliRunner().invoke(app, ["worker", "--log-format", "xml"])
    assert result.exit_code == 2
    assert "--log-format" in result.output
    assert "'xml': use text or json" in result.output
