"""Health for orchestrators: every long-running command answers ``/livez`` and
``/readyz`` over HTTP (``--health-port``, the metrics port, or the port it serves);
readiness is 503 with the reason while its server is away and 200 again once it is back,
liveness 200 throughout; a probe needs no token. Each command runs as a real process
against a server the test stops and starts again on the same port."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from fairque.metrics import LIVE_PATH, READY_PATH, Metrics, monitoring_app, serve_health
from fairque.servers.embedded import LocalServer, free_port
from tests.conftest import wait_for

pytestmark = pytest.mark.one_engine
CLI = [sys.executable, "-c", "from fairque.cli import main; main()"]
TASKS = textwrap.dedent("""
    from fairque import task


    @task
    def noop() -> None:
        pass
""")
CONTRACT = "queues: [{id: 3, name: jobs, fields: {n: int}}]\n"
HANDLERS = textwrap.dedent("""
    from fairque.runners.storage_worker import HandlerStats


    async def handle_jobs(storage, tasks):
        await storage.done_task([task.task_id for task in tasks])
        return HandlerStats(processed=len(tasks))


    HANDLERS = {"jobs": handle_jobs}
""")
ADDRESS = re.compile(r"(http://127\.0\.0\.[12]:\d+)")


class Command:
    """A long-running command, its output in files the test reads while it runs."""

    def __init__(self, args: list[str], cwd: Path) -> None:
        self.out, self.err = cwd / "stdout.txt", cwd / "stderr.txt"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.process = subprocess.Popen([*CLI, *args], cwd=cwd, stdout=out, stderr=err)

    def address(self, said: str) -> str:
        """The address in the first line of stdout or stderr that holds ``said``."""

        def found() -> str:
            assert self.process.poll() is None, self.err.read_text()
            for line in (self.out.read_text() + self.err.read_text()).splitlines():
                if said in line and (match := ADDRESS.search(line)):
                    return match.group(1)
            return ""

        return wait_for(found, timeout=60)

    def stop(self) -> str:
        """SIGTERM; what it said on stderr if it did not end with exit 0, else ''."""
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout=60)
        return "" if code == 0 else f"exit {code}: {self.err.read_text()}"


def answer(url: str) -> tuple[int, str]:
    try:
        response = httpx.get(url, timeout=10)
    except httpx.HTTPError as exc:  # not listening yet
        return 0, str(exc)
    return response.status_code, response.text


def answers(url: str, status: int) -> str:
    """Polls ``url`` until it answers ``status``; its text."""
    seen: list[tuple[int, str]] = []

    def right() -> bool:
        seen.append(answer(url))
        return seen[-1][0] == status

    wait_for(right, timeout=60)
    return seen[-1][1]


@pytest.fixture
def restartable() -> Iterator[LocalServer]:
    """A server of this test's own, on a port it keeps across a restart."""
    with LocalServer(port=free_port()) as server:
        yield server


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "tasks.py").write_text(TASKS)
    (tmp_path / "queues.yaml").write_text(CONTRACT)
    (tmp_path / "job_handlers.py").write_text(HANDLERS)
    return tmp_path


def _health_port(url: str, namespace: str) -> list[str]:
    return ["--url", url, "--namespace", namespace, "--health-port", "0"]


# What runs, given the server's URL and a namespace; where its health address is said.
RUNNERS: dict[str, Callable[[str, str], list[str]]] = {
    "worker": lambda url, ns: ["worker", "--tasks", "tasks", *_health_port(url, ns)],
    "worker --processes 2": lambda url, ns: [
        "worker", "--tasks", "tasks", "--processes", "2", *_health_port(url, ns)
    ],
    "worker (metrics port)": lambda url, ns: [  # another address (0.0.0.0 in a pod)
        "worker", "--tasks", "tasks", "--url", url, "--namespace", ns, "--metrics-port", "0",
        "--monitoring-host", "127.0.0.2",
    ],
    "scheduler run": lambda url, ns: ["scheduler", "run", *_health_port(url, ns)],
    "storage-worker": lambda url, ns: [
        "storage-worker", "--contract", "queues.yaml", "--handlers", "job_handlers:HANDLERS",
        *_health_port(url, ns),
    ],
    "storage-manager": lambda url, ns: ["storage-manager", *_health_port(url, ns)],
}  # fmt: skip


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_runner_is_ready_while_its_server_answers(
    runner: str, restartable: LocalServer, home: Path, namespace: str
) -> None:
    command = Command(RUNNERS[runner](restartable.url, namespace), home)
    try:
        where = command.address("metrics on" if "metrics" in runner else "health on")
        assert where.startswith("http://127.0.0.2:" if "metrics" in runner else "http://127.0.0.1:")
        if "processes" in runner:  # the children are up (a SIGTERM while they import fails)
            wait_for(lambda: command.err.read_text().count(" started (concurrency") == 2, 60)
        assert answers(where + READY_PATH, 200) == "ready\n"
        assert answers(where + LIVE_PATH, 200) == "live\n"
        restartable.stop()
        reason = answers(where + READY_PATH, 503)
        assert reason.startswith("not ready: ")
        assert reason.count("\n") == 1
        assert answer(where + LIVE_PATH) == (200, "live\n")  # alive: it waits for the server
        restartable.start()
        assert answers(where + READY_PATH, 200) == "ready\n"
        if "metrics" in runner:
            assert "fairque_tasks" in answer(where + "/metrics")[1]
    finally:
        assert command.stop() == ""


@pytest.mark.parametrize("service", ["master", "dashboard"])
def test_a_service_is_ready_while_its_server_answers_and_a_probe_needs_no_token(
    service: str, restartable: LocalServer, home: Path, namespace: str
) -> None:
    args = [service, "--port", "0", "--url", restartable.url, "--namespace", namespace]
    command = Command([*args, "--token", "s3cret"], home)
    try:
        where = command.address(f"fairque {service}: ")
        assert answers(where + READY_PATH, 200) == "ready\n"
        assert answer(where + LIVE_PATH) == (200, "live\n")
        assert answer(where + "/ui/api/overview")[0] == 401  # the rest still needs the token
        restartable.stop()
        assert answers(where + READY_PATH, 503).startswith("not ready: ")
        assert answer(where + LIVE_PATH) == (200, "live\n")
        restartable.start()
        assert answers(where + READY_PATH, 200) == "ready\n"
    finally:
        assert command.stop() == ""


def test_probes_are_left_out_of_the_api_document(home: Path) -> None:
    from fairque.http.master import create_master

    paths = create_master().openapi_schema.paths or {}
    assert LIVE_PATH not in paths
    assert READY_PATH not in paths


def test_a_probe_that_fails_says_why_in_one_line() -> None:
    def refused() -> None:
        raise ConnectionError("Error 111 connecting to 127.0.0.1:1.\nConnection refused.")

    server = serve_health(refused)
    try:
        status, text = answer(f"http://127.0.0.1:{server.port}{READY_PATH}")
        assert status == 503
        assert text == "not ready: Error 111 connecting to 127.0.0.1:1. Connection refused.\n"
        assert answer(f"http://127.0.0.1:{server.port}/metrics")[0] == 404  # health only
    finally:
        server.close()


def test_the_metrics_app_serves_metrics_beside_the_probes() -> None:
    metrics = Metrics()
    server = metrics.serve(0, probe=lambda: None)
    try:
        where = f"http://127.0.0.1:{server.port}"
        assert answer(where + READY_PATH) == (200, "ready\n")
        assert "# HELP queue_running_workers" in answer(where + "/metrics")[1]
        assert callable(monitoring_app(metrics.registry, None))
    finally:
        server.close()


def test_a_taken_health_port_is_one_line(home: Path) -> None:
    with LocalServer() as server:
        taken = serve_health(lambda: None)
        try:
            run = subprocess.run(
                [*CLI, "scheduler", "run", "--url", server.url, "--health-port", str(taken.port)],
                check=False, cwd=home, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
        finally:
            taken.close()
    assert run.returncode == 2
    assert run.stderr.strip() == (
        f"error: --health-port {taken.port}: cannot listen on 127.0.0.1:{taken.port} "
        "(Address already in use); choose another port"
    )
