"""``fairque tarantool``: a Tarantool for the storage, started, used and stopped as a user
would, and each way it refuses to start in one line."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fairque.servers.embedded import free_port
from fairque.storage import PutTaskRequest, TarantoolStorage
from tests.conftest import TARANTOOL, StartCli, wait_for
from tests.test_worker_process import gone, read_stderr_until

pytestmark = pytest.mark.skipif(TARANTOOL is None, reason="no tarantool binary")

STOPS = "(Ctrl-C stops)"


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux's /proc)."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


@pytest.fixture
def start(start_cli: StartCli, tmp_path: Path) -> Iterator[StartCli]:
    """Starts ``fairque tarantool`` processes with a home of their own; a server one of
    them left running (a failed test) is ended by its PID."""
    servers: list[int] = []

    def start_tarantool(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
        process = start_cli("tarantool", *args, env={"FAIRQUE_HOME": str(tmp_path), **env})
        servers.append(process.pid)
        return process

    yield start_tarantool
    for parent in servers:
        try:
            left = children(parent)
        except FileNotFoundError:  # ended, and its server with it
            continue
        for child in left:
            os.kill(child, signal.SIGKILL)


def test_it_serves_the_storage_in_its_data_folder_until_sigterm(
    start: StartCli, tmp_path: Path
) -> None:
    data = tmp_path / "made" / "here"
    process = start("--port", "0", "--data", str(data), "--memory", "64", env={})
    said = read_stderr_until(process, STOPS)
    [line] = said.splitlines()
    url = line.split("; ")[0].removeprefix("fairque tarantool: ")
    assert line == (
        f"fairque tarantool: {url}; data folder {data}; memory 64 MiB; clients come as "
        "guest (loopback only) (Ctrl-C stops)"
    )
    with TarantoolStorage(url, "cli") as storage:
        [task_id] = storage.put_tasks([PutTaskRequest(1, b"kept")])
        assert storage.get_stat().of(1).total == 1
    assert (data / "admin.sock").exists()
    [server] = children(process.pid)
    process.send_signal(signal.SIGTERM)
    _, rest = process.communicate(timeout=30)
    assert process.returncode == 0
    assert rest == "fairque tarantool: stopped\n"
    assert gone(server)
    # Started again on the same folder: the task is still there.
    again = start("--port", "0", "--data", str(data), env={})
    url = read_stderr_until(again, STOPS).split("; ")[0].removeprefix("fairque tarantool: ")
    with TarantoolStorage(url, "cli") as storage:
        [task] = storage.get_task(1, 10)
    assert (task.id, task.data) == (task_id, b"kept")
    again.send_signal(signal.SIGINT)
    assert again.wait(timeout=30) == 0


def test_a_user_and_its_password_come_from_the_environment(start: StartCli) -> None:
    env = {"FAIRQUE_TARANTOOL_USER": "app", "FAIRQUE_TARANTOOL_PASSWORD": "s3cret"}
    process = start("--port", "0", env=env)
    line = read_stderr_until(process, STOPS)
    assert "clients log in as app" in line
    assert "s3cret" not in line
    port = line.split("; ")[0].rpartition(":")[2]
    with TarantoolStorage(f"tarantool://app:s3cret@127.0.0.1:{port}", "cli") as storage:
        assert storage.get_stat().queues == {}
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0


def test_a_server_that_ends_by_itself_ends_the_command_in_one_line(start: StartCli) -> None:
    process = start("--port", "0", env={})
    read_stderr_until(process, STOPS)
    [server] = children(process.pid)
    os.kill(server, signal.SIGKILL)
    _, said = process.communicate(timeout=30)
    assert process.returncode == 2
    assert said.startswith("error: tarantool ended by itself: ")
    assert said.count("\n") == 1


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="no setpriv (util-linux)")
def test_a_killed_command_takes_its_server_with_it(start: StartCli) -> None:
    process = start("--port", "0", env={})
    read_stderr_until(process, STOPS)
    [server] = children(process.pid)
    process.kill()
    process.wait(timeout=30)
    wait_for(lambda: gone(server), timeout=30)  # it got SIGTERM: stopped, not orphaned


def test_a_taken_port_is_one_line_before_anything_starts(start: StartCli) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = start("--port", str(port), env={})
        _, said = process.communicate(timeout=30)
    assert process.returncode == 2
    assert said == (
        f"error: --port {port}: cannot listen on 127.0.0.1:{port} (Address already in use); "
        "choose another port\n"
    )


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (
            ["--host", "0.0.0.0"],
            {},
            "lets anyone there in as guest: set FAIRQUE_TARANTOOL_USER and "
            "FAIRQUE_TARANTOOL_PASSWORD, or listen on 127.0.0.1",
        ),
        (["--user", "app"], {}, "--user app: set its password in $FAIRQUE_TARANTOOL_PASSWORD"),
        ([], {"FAIRQUE_TARANTOOL_MEMORY": "8"}, "'--memory'"),
        ([], {"PATH": "/nonexistent"}, "no tarantool on PATH: install Tarantool 2.6 or newer"),
    ],
)
def test_what_it_cannot_start_with_is_one_line(
    start: StartCli, args: list[str], env: dict[str, str], expected: str
) -> None:
    env = {"FAIRQUE_TARANTOOL_PASSWORD": "", **env}
    process = start("--port", str(free_port()), *args, env=env)
    _, said = process.communicate(timeout=30)
    assert process.returncode == 2
    assert said.startswith("error: ")
    assert expected in said
    assert said.count("\n") == 1
    assert STOPS not in said
