"""The embedded default: no URL starts (or attaches to) one Valkey per data folder."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from fairque import EmbeddedServerError, FairQueue, Task
from fairque.config import URL_ENV, redis_url
from fairque.servers.embedded import (
    HOME_ENV,
    LocalServer,
    ensure_server,
    free_port,
    home,
    server_pid,
    stop_server,
)


@pytest.fixture
def fairque_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh data folder (short, for the socket path); its server is stopped after."""
    folder = Path(tempfile.mkdtemp(prefix="fq-", dir="/tmp"))
    monkeypatch.setenv(HOME_ENV, str(folder))
    monkeypatch.delenv(URL_ENV, raising=False)
    yield folder
    stop_server(folder)


def run_python(code: str, folder: Path) -> str:
    env = {**os.environ, HOME_ENV: str(folder)}
    env.pop(URL_ENV, None)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


PUSH = "from fairque import FairQueue, Task; print(FairQueue(namespace='shared').push(Task(user_id='u', payload={payload!r})))"  # noqa: E501
POP = "from fairque import FairQueue; [print(t.task_id, t.payload) for t in FairQueue(namespace='shared').pop(count=10)]"  # noqa: E501


def test_a_pusher_and_a_worker_in_two_processes_share_one_queue(fairque_home: Path) -> None:
    task_id = run_python(PUSH.format(payload="hello"), fairque_home)
    pid = server_pid(fairque_home)
    assert pid is not None
    assert run_python(POP, fairque_home) == f"{task_id} hello"
    assert server_pid(fairque_home) == pid
    assert (fairque_home / "valkey.sock").stat().st_mode & 0o077 == 0


def test_processes_starting_at_once_get_one_server(fairque_home: Path) -> None:
    env = {**os.environ, HOME_ENV: str(fairque_home)}
    env.pop(URL_ENV, None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PUSH.format(payload=i)],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    ids = {proc.communicate(timeout=60)[0].strip() for proc in procs}
    assert all(proc.returncode == 0 for proc in procs)
    popped = run_python(POP, fairque_home).splitlines()
    assert {line.split()[0] for line in popped} == ids


def test_tasks_survive_a_server_restart(fairque_home: Path) -> None:
    queue = FairQueue(namespace="durable")
    task_id = queue.push(Task(user_id="u", payload="kept"))
    queue.close()
    first_pid = server_pid(fairque_home)
    assert stop_server(fairque_home) is True
    assert server_pid(fairque_home) is None
    assert stop_server(fairque_home) is False
    queue = FairQueue(namespace="durable")
    assert server_pid(fairque_home) not in (None, first_pid)
    leased = queue.pop()
    assert [(task.task_id, task.payload) for task in leased] == [(task_id, "kept")]
    queue.close()


def test_attaching_twice_returns_the_same_server(fairque_home: Path) -> None:
    url = ensure_server()
    pid = server_pid()
    assert ensure_server(fairque_home) == url
    assert server_pid(fairque_home) == pid
    assert url == f"unix://{fairque_home.resolve()}/valkey.sock"


def test_a_too_long_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EmbeddedServerError, match=HOME_ENV):
        ensure_server(tmp_path / ("x" * 120))


def test_where_the_url_comes_from(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(URL_ENV, "redis://127.0.0.1:1/0")
    assert redis_url("redis://explicit") == "redis://explicit"
    assert redis_url(None) == "redis://127.0.0.1:1/0"
    monkeypatch.delenv(HOME_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert home() == tmp_path / "fairque"


def test_a_server_that_cannot_start_says_why() -> None:
    server = LocalServer("/bin/false")
    with pytest.raises(EmbeddedServerError, match=r"the server exited \(1\)"):
        server.start(timeout=600)  # seen as it exits, not when the wait runs out
    server.close()


def test_a_local_server_whose_chosen_port_was_taken_meanwhile_takes_another() -> None:
    server = LocalServer(cluster_bus=True)
    with socket.socket() as taken:  # another process's socket, between choice and start
        taken.bind(("127.0.0.1", server.port))
        taken.listen()
        chosen = server.port
        with server:
            assert server.port != chosen
            assert redis.Redis.from_url(server.url).ping()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        given = LocalServer(port=taken.getsockname()[1])  # a port the caller gave: kept
        with pytest.raises(EmbeddedServerError, match="could not listen"):
            given.start(timeout=600)  # seen as the server exits, not as a wait run out
        given.close()


def test_free_ports_are_below_the_ones_outgoing_connections_get() -> None:
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(free_port() < low for _ in range(20))
