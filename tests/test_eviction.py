"""The eviction guard: a server whose maxmemory-policy may evict keys is named, with the
fix, in one warning line when a worker, a scheduler, a master or ``fairque stats``
starts; a server that refuses CONFIG GET is said to be unchecked, and nothing fails; the
embedded server never evicts."""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from typer.testing import CliRunner

from fairque import FairQueue, Task
from fairque.cli import app
from fairque.engine.connect import sync_client
from fairque.engine.eviction import eviction_warning
from fairque.servers.embedded import LocalServer, ensure_server, stop_server
from tests.conftest import Server, wait_for

pytestmark = pytest.mark.cluster  # a cluster answers CONFIG GET per node
CLI = [sys.executable, "-c", "from fairque.cli import main; main()"]
TASKS = textwrap.dedent("""
    from fairque import task


    @task
    def noop() -> None:
        pass
""")


@pytest.fixture(scope="module")
def lru_server() -> Iterator[LocalServer]:
    with LocalServer(options=["--maxmemory-policy", "allkeys-lru"]) as started:
        yield started


def test_a_server_that_may_evict_is_named_with_the_fix(lru_server: LocalServer) -> None:
    with redis.Redis.from_url(lru_server.url) as client:
        warning = eviction_warning(client)
    assert warning is not None
    assert "maxmemory-policy is allkeys-lru" in warning
    assert "CONFIG SET maxmemory-policy noeviction" in warning


def test_a_server_that_never_evicts_gets_no_warning(server: Server) -> None:
    client = sync_client(server.url)
    try:
        assert eviction_warning(client) is None
    finally:
        client.close()


@pytest.mark.one_engine
def test_a_server_that_refuses_config_get_is_said_to_be_unchecked(
    lru_server: LocalServer,
) -> None:
    with redis.Redis.from_url(lru_server.url) as admin:
        admin.acl_setuser("app", enabled=True, passwords=["+pw"], keys=["*"], channels=["*"],
                          commands=["+@all", "-config"])  # fmt: skip
    url = lru_server.url.replace("redis://", "redis://app:pw@")
    with redis.Redis.from_url(url) as client:
        warning = eviction_warning(client)
    assert warning is not None
    assert warning.startswith("could not check the server's maxmemory-policy")
    assert "make sure it is noeviction" in warning


@pytest.mark.one_engine
def test_stats_warns_in_one_line(lru_server: LocalServer, namespace: str) -> None:
    with FairQueue(lru_server.url, namespace) as queue:  # figures to show
        queue.push(Task(user_id="alice", payload=1))
    shown = CliRunner().invoke(app, ["stats", "--url", lru_server.url, "--namespace", namespace])
    assert shown.exit_code == 0, shown.output
    warnings = [line for line in shown.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, shown.stderr
    assert "allkeys-lru" in warnings[0]


@pytest.mark.one_engine
@pytest.mark.parametrize(
    ("command", "started", "starts"),
    [
        (["worker", "--tasks", "tasks"], "started (concurrency", 1),
        (["worker", "--tasks", "tasks", "--processes", "2"], "started (concurrency", 2),
        (["scheduler", "run"], " started", 1),  # its signal handlers are set by then
        (["master", "--port", "0"], "(Ctrl-C stops)", 1),
    ],
    ids=["worker", "worker-processes", "scheduler", "master"],
)
def test_long_running_commands_warn_once_when_they_start(  # noqa: PLR0917 - parameters
    command: list[str],
    started: str,
    starts: int,
    lru_server: LocalServer,
    namespace: str,
    tmp_path: Path,
) -> None:
    (tmp_path / "tasks.py").write_text(TASKS)
    log = tmp_path / "stderr.txt"
    args = [*command, "--url", lru_server.url, "--namespace", namespace]
    with log.open("w") as stderr:
        process = subprocess.Popen([*CLI, *args], cwd=tmp_path, stderr=stderr,
                                   stdout=subprocess.DEVNULL, text=True)  # fmt: skip
    try:
        # Every process up (a worker process still starting would die of the signal).
        wait_for(lambda: log.read_text().count(started) >= starts, timeout=60)
        wait_for(lambda: "allkeys-lru" in log.read_text(), timeout=60)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    said = log.read_text()
    assert said.count("maxmemory-policy is allkeys-lru") == 1, said


@pytest.mark.one_engine
def test_the_embedded_server_never_evicts() -> None:
    folder = Path(tempfile.mkdtemp(prefix="fq-", dir="/tmp"))
    try:
        with redis.Redis.from_url(ensure_server(folder)) as client:
            assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    finally:
        stop_server(folder)


def test_a_server_that_may_evict_is_a_metric(lru_server: LocalServer) -> None:
    from fairque import FairQueue
    from fairque.metrics import Metrics

    with FairQueue(lru_server.url, "evicting") as queue:
        metrics = Metrics()
        metrics.watch_queue(queue)
        found = metrics.registry.get_sample_value(
            "fairque_server_may_evict", {"namespace": "evicting"}
        )
    assert found == 1.0
