"""A CLI that explains itself: one-line errors (exit 2, no traceback, --debug for one),
start and stop lines of long-running commands, a worker that waits for its server, a
dashboard that answers 503 when the server is down, distinct default ports, the
embedded server's status and stop, inspecting tasks from the shell, stats that add up,
and help that names values, not Python types."""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer
from litestar.testing import TestClient
from typer.testing import CliRunner

from fairque import FairQueue, Job, JobQueue, PutTaskRequest, RedisStorage, Task, TaskState
from fairque.cli import app
from fairque.cli.examples import EXAMPLES
from fairque.cli.queue import stat_rows
from fairque.config import URL_ENV
from fairque.http.ui import DashboardConfig, UiConfig, create_dashboard
from fairque.servers.embedded import HOME_ENV, LocalServer, ensure_server, free_port, stop_server
from tests.conftest import wait_for
from tests.test_data_format import COMMANDS, NOOP

runner = CliRunner()
CLI = [sys.executable, "-c", "from fairque.cli import main; main()"]


@pytest.fixture
def home() -> Iterator[Path]:
    """A FAIRQUE_HOME of this test (short: the socket path has a length limit)."""
    folder = Path(tempfile.mkdtemp(prefix="fq-", dir="/tmp"))
    yield folder
    stop_server(folder)


@pytest.fixture
def env(home: Path) -> dict[str, str]:
    """The environment of a command: nothing reaches the user's embedded server."""
    environment = {**os.environ, HOME_ENV: str(home)}
    environment.pop(URL_ENV, None)
    return environment


def fairque(
    *args: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Runs ``fairque`` as a user would (its entry point, in a process)."""
    return subprocess.run([*CLI, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


def dead_url() -> str:
    """A loopback URL where nothing listens."""
    return f"redis://127.0.0.1:{free_port()}"


class Running:
    """A long-running command, its stderr in a file the test reads while it runs."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.log = cwd / f"stderr-{len(list(cwd.glob('stderr-*')))}.txt"
        with self.log.open("w") as stderr:
            self.process = subprocess.Popen([*CLI, *args], env=env, cwd=cwd, text=True,
                                            stdout=subprocess.DEVNULL, stderr=stderr)  # fmt: skip

    @property
    def stderr(self) -> str:
        return self.log.read_text()

    def says(self, text: str, timeout: float = 30) -> None:
        wait_for(lambda: text in self.stderr, timeout=timeout)

    def stop(self) -> int:
        """SIGTERM, then its exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)


@pytest.fixture
def running() -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for command in started:  # only the processes this test started, by PID
        if command.process.poll() is None:
            command.process.kill()
            command.process.wait(timeout=10)


def one_error_line(result: Any) -> str:
    """The one line a failed command printed (a process's result, or CliRunner's)."""
    code = getattr(result, "returncode", getattr(result, "exit_code", None))
    assert code == 2, (code, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in result.stderr
    return str(lines[0])


def test_connection_errors_are_one_line() -> None:
    refused = one_error_line(runner.invoke(app, ["stats", "--url", dead_url()]))
    assert "cannot reach the server" in refused
    assert "Connection refused" in refused
    unknown = one_error_line(runner.invoke(app, ["stats", "--url", "redis://no-such.invalid:1"]))
    assert "cannot reach the server" in unknown
    assert "no-such.invalid" in unknown
    scheme = one_error_line(runner.invoke(app, ["push", "x", "-u", "u", "--url", "http://h"]))
    assert "redis+cluster://" in scheme
    assert "rediss://" in scheme
    assert "http://" in scheme


def listening(port: int) -> bool:
    """Whether something accepts connections on ``port`` of 127.0.0.1."""
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_a_url_at_an_http_port_is_one_line_that_says_so() -> None:
    """--url pointed at the master's (or any HTTP) port instead of the server's."""
    with LocalServer() as server:
        master = subprocess.Popen(
            [*CLI, "master", "--url", server.url, "--port", str(port := free_port())],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_for(lambda: listening(port), timeout=60)
            said = one_error_line(
                runner.invoke(app, ["stats", "--url", f"redis://127.0.0.1:{port}"])
            )
        finally:
            master.terminate()
            master.wait(timeout=30)
    assert "does not speak the Redis protocol" in said
    assert "HTTP" in said


def test_tasks_given_as_a_file_say_to_give_the_module() -> None:
    for given in ("./mytasks.py", "mytasks.py", "app/tasks.py", ".tasks"):
        said = one_error_line(runner.invoke(app, ["worker", "--tasks", given]))
        assert f"--tasks {given}: give a module's name, not a file" in said, said


def test_a_worker_refuses_a_url_of_another_scheme_before_it_says_it_starts(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "tasks.py").write_text(NOOP)
    done = fairque(
        "worker", "--tasks", "tasks", "--url", "http://127.0.0.1:9", env=env, cwd=tmp_path
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: redis_url: must start with one of redis://, rediss://, unix://, "
        "redis+cluster://, rediss+cluster://, redis+sentinel://, rediss+sentinel:// "
        "(it starts with http://)"
    ]


def test_an_http_worker_refuses_a_master_url_it_cannot_send_to() -> None:
    for option, url in (("--master", "localhost:8080"), ("--public-url", "ftp://h/")):
        args = ["http-worker", "--master", "http://127.0.0.1:1", option, url, "--tasks", "x"]
        said = one_error_line(runner.invoke(app, args))
        assert f"{option} {url}: must be an http:// or https:// URL with a host" in said


def test_usage_errors_are_one_line_and_debug_shows_the_traceback(env: dict[str, str]) -> None:
    usage = one_error_line(fairque("push", "x", "--user", "u", "--priority", "9", env=env))
    assert "--priority" in usage
    result = fairque("--debug", "stats", "--url", dead_url(), env=env)
    assert result.returncode != 0
    assert "Traceback" in result.stderr
    assert "ConnectionError" in result.stderr


def test_a_refused_or_missing_password_is_one_line_and_never_printed() -> None:
    with LocalServer() as server:
        with FairQueue(server.url) as queue:  # (LocalServer waits for a PONG: set it after)
            queue.redis.config_set("requirepass", "s3cret-pw")
        wrong = server.url.replace("redis://", "redis://:not-it@")
        refused = one_error_line(runner.invoke(app, ["stats", "--url", wrong]))
        assert "refused the credentials" in refused
        assert "not-it" not in refused
        missing = one_error_line(runner.invoke(app, ["stats", "--url", server.url]))
        assert "requires a password" in missing
        right = server.url.replace("redis://", "redis://:s3cret-pw@")
        assert runner.invoke(app, ["stats", "--url", right]).exit_code == 0


def test_stats_watch_ends_in_one_line_when_the_server_stops(
    env: dict[str, str], home: Path, running: list[Running]
) -> None:
    server = LocalServer().start()
    try:
        with FairQueue(server.url) as queue:
            queue.push(Task(user_id="alice", payload=1))  # a namespace in use: figures to watch
            watcher = Running(["stats", "--watch", "0.05", "--url", server.url], env, home)
            running.append(watcher)
            wait_for(lambda: len(queue.redis.client_list()) > 1)  # the watcher is connected
    finally:
        server.close()
    assert watcher.process.wait(timeout=30) == 2
    lines = watcher.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: cannot reach the server")


TASKS = textwrap.dedent("""
    import asyncio

    from fairque import task


    @task(name="slow")
    async def slow(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "slept"
""")


def test_a_worker_waits_for_its_server_says_where_it_runs_and_how_it_stopped(
    env: dict[str, str], home: Path, running: list[Running]
) -> None:
    (home / "tasks.py").write_text(TASKS)  # --tasks tasks, from the current directory
    port = free_port()
    url = f"redis://127.0.0.1:{port}"
    env = {**env, "FAIRQUE_GRACE_SECONDS": "0.5"}
    worker = Running(["worker", "--tasks", "tasks", "--url", url, "--concurrency", "2"], env, home)
    running.append(worker)
    worker.says("is unreachable")  # waits, with backoff, instead of exiting
    assert worker.process.poll() is None
    assert (
        f"fairque worker: server {url}; namespace default; serving every tenant; "
        "functions slow" in worker.stderr
    )
    with LocalServer(port=port) as server, FairQueue(server.url) as queue:
        quick = queue.push(Task(user_id="a", name="slow", payload={"args": [0]}, keep_result=True))
        assert queue.result(quick, timeout=30) == "slept"
        queue.push(Task(user_id="a", name="slow", payload={"args": [60]}))
        wait_for(lambda: queue.stats().states.get(TaskState.STARTED))
        assert worker.stop() == 0
        assert "stopping: waiting up to 0.5 s for 1 running task(s)" in worker.stderr
        assert "fairque worker: stopped: 1 finished, 0 failed, 1 handed back" in worker.stderr
        assert queue.stats().states.get(TaskState.QUEUED) == 1


# Commands that call the server on their own (the dashboard waits for a request).
CALLING = ("worker", "scheduler run", "master", "storage-worker", "storage-manager")
# The manager calls the server once a round, 5 s apart by default: it would see the
# outage, then the server back, only at its next rounds (10 s of this test's 12).
ROUNDS = {"storage-manager": ["--interval", "0.5"]}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_long_running_command_waits_out_an_outage_and_stops_with_status_zero(
    command: str, env: dict[str, str], home: Path, running: list[Running]
) -> None:
    (home / "tasks.py").write_text(NOOP + "\n\nH = {'jobs': None}\n")
    (home / "queues.yaml").write_text("queues: [{id: 3, name: jobs, fields: {}}]\n")
    port = free_port()
    server = LocalServer(port=port).start()
    started = Running([*COMMANDS[command], *ROUNDS.get(command, []), "--url", server.url],
                      env, home)  # fmt: skip
    running.append(started)
    try:
        started.says("(Ctrl-C stops)")
        with FairQueue(server.url) as queue:
            wait_for(lambda: len(queue.redis.client_list()) > 1)  # it talks to the server
    finally:
        server.close()  # the outage
    if command in CALLING:
        started.says("is unreachable")
    with LocalServer(port=port):  # back, on the same port
        if command in CALLING:
            started.says("answers again")
        assert started.stop() == 0, started.stderr
    assert "Traceback" not in started.stderr
    assert started.stderr.count("is unreachable") <= 1, started.stderr  # said once


def test_an_unknown_tasks_module_names_where_it_looked(env: dict[str, str], home: Path) -> None:
    line = one_error_line(fairque("worker", "--tasks", "nowhere", "--url", dead_url(), env=env,
                                  cwd=home))  # fmt: skip
    assert "nowhere" in line
    assert str(home) in line


def test_the_dashboard_starts_without_its_server_and_answers_503(
    env: dict[str, str], home: Path, running: list[Running]
) -> None:
    port = free_port()
    dashboard = Running(["dashboard", "--url", dead_url(), "--port", str(port)], env, home)
    running.append(dashboard)
    dashboard.says(f"fairque dashboard: Web UI at http://127.0.0.1:{port}/ui")
    assert "warning: cannot reach the server" in dashboard.stderr
    reply = wait_for(lambda: _get(f"http://127.0.0.1:{port}/ui/api/overview"))
    assert reply is not None
    assert reply.status_code == 503
    assert reply.json()["error"] == "unavailable"
    assert "is unreachable" in reply.json()["message"]
    page = _get(f"http://127.0.0.1:{port}/ui")
    assert page is not None
    assert page.status_code == 200  # the page still loads
    assert dashboard.stop() == 0
    assert "fairque dashboard: stopped" in dashboard.stderr
    assert "is unreachable" in dashboard.stderr  # logged, once


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port another socket listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


@pytest.mark.parametrize(
    "command",
    [
        ["master", "--url", "{url}", "--port", "{port}"],
        ["dashboard", "--url", "{url}", "--port", "{port}"],
        ["http-worker", "--master", "http://127.0.0.1:1", "--port", "{port}"],
        ["worker", "--url", "{url}", "--tasks", "tasks", "--metrics-port", "{port}"],
        ["scheduler", "run", "--url", "{url}", "--metrics-port", "{port}"],
    ],
    ids=lambda command: command[0] if command[0] != "scheduler" else "scheduler-run",
)
def test_a_taken_port_ends_a_command_in_one_line_before_it_says_it_started(
    command: list[str], taken_port: int, env: dict[str, str], home: Path
) -> None:
    (home / "tasks.py").write_text(TASKS)
    args = [arg.format(port=taken_port, url=dead_url()) for arg in command]
    line = one_error_line(fairque(*args, env=env, cwd=home))
    assert f"port {taken_port}" in line or f"-port {taken_port}" in line
    assert f"127.0.0.1:{taken_port}" in line
    assert "Address already in use" in line
    assert "cannot reach the server" not in line


def test_port_0_is_announced_as_the_port_it_got(
    env: dict[str, str], home: Path, running: list[Running]
) -> None:
    (home / "tasks.py").write_text(TASKS)
    http_worker = ["http-worker", "--master", "http://127.0.0.1:1", "--tasks", "tasks"]
    for command in (["dashboard", "--url", dead_url()], http_worker):
        service = Running([*command, "--port", "0"], env, home)
        running.append(service)
        service.says("(Ctrl-C stops)")
        assert "127.0.0.1:0" not in service.stderr
        port = int(service.stderr.split("http://127.0.0.1:")[1].split("/")[0].split(" ")[0])
        assert port > 0
        answered = functools.partial(_get, f"http://127.0.0.1:{port}/")
        assert wait_for(answered) is not None
        assert service.stop() == 0


def _get(url: str) -> httpx.Response | None:
    try:
        return httpx.get(url, headers={"accept": "application/json"}, timeout=5)
    except httpx.TransportError:
        return None  # not listening yet


def test_the_dashboard_routes_answer_503_in_process() -> None:
    config = DashboardConfig(UiConfig(url=dead_url(), sample_every=60))
    with TestClient(create_dashboard(config)) as client:
        for path in ("/ui/api/overview", "/ui/api/tasks?state=failed", "/ui/api/schedules"):
            reply = client.get(path, headers={"accept": "application/json"})
            assert reply.status_code == 503, path
            assert reply.json()["error"] == "unavailable"


def _commands(group: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from _commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


def _root() -> Any:
    return typer.main.get_command(app)


def test_no_two_commands_default_to_the_same_port() -> None:
    ports = {
        name: param.default
        for name, command in _commands(_root())
        for param in command.params
        if param.name == "port"
    }
    assert set(ports) == {"master", "dashboard", "http-worker", "tarantool"}
    assert len(set(ports.values())) == len(ports), ports


def test_help_names_values_not_python_types_and_options_share_their_variables() -> None:
    env_of: dict[str, set[str]] = {}
    for name, command in _commands(_root()):
        shown = runner.invoke(app, [*name.split(), "--help"], terminal_width=200)
        assert shown.exit_code == 0, name
        for raw in ("<str>", "<int", "<float", "<bool>", "<path>", "list[", "TEXT", "INTEGER"):
            assert raw not in shown.output, (name, raw)
        for param in command.params:
            for option in getattr(param, "opts", []):
                if name == "demo":  # its own throwaway server, never $FAIRQUE_REDIS_URL's
                    continue
                if option in ("--url", "--namespace", "--shards", "--token", "--tasks"):
                    env_of.setdefault(option, set()).add(str(param.envvar))
    assert env_of["--url"] == {"FAIRQUE_REDIS_URL"}
    assert env_of["--namespace"] == {"FAIRQUE_NAMESPACE"}
    assert env_of["--shards"] == {"FAIRQUE_SHARDS"}
    assert env_of["--token"] == {"FAIRQUE_MASTER_TOKEN"}
    assert env_of["--tasks"] == {"FAIRQUE_TASKS"}


def test_help_lists_whole_sentences_plain_usage_and_examples_that_parse() -> None:
    listed = runner.invoke(app, ["--help"], terminal_width=100)
    commands = listed.output.split("Commands:")[1]
    assert "..." not in commands  # click cuts a command's line at ~45 characters
    for name, _command in _commands(_root()):
        shown = runner.invoke(app, [*name.split(), "--help"], terminal_width=100)
        usage = shown.output.splitlines()[0]
        assert "{" not in usage, (name, usage)
        if name in EXAMPLES:
            assert "Examples:" in shown.output, name
            assert all(line in shown.output for line in EXAMPLES[name]), name
    for name, lines in EXAMPLES.items():
        command = dict(_commands(_root()))[name]
        for line in lines:
            words = shlex.split(line)
            words = words[: next((n for n, w in enumerate(words) if w in ("|", "||")), None)]
            assert words[: 1 + len(name.split())] == ["fairque", *name.split()], line
            args = words[1 + len(name.split()) :]
            command.make_context(name, args)  # raises on an unknown option or bad value
    assert {"worker", "push", "stats", "tasks", "task get", "tenant set", "scheduler add",
            "master"} <= set(EXAMPLES)  # fmt: skip


def test_server_status_and_a_stop_that_warns_of_attached_clients(home: Path) -> None:
    env = {HOME_ENV: str(home)}
    assert runner.invoke(app, ["server", "status"], env=env).exit_code == 1
    url = ensure_server(home)
    with FairQueue(url) as queue:
        queue.stats()  # a client attached
        status = runner.invoke(app, ["server", "status"], env=env)
        assert status.exit_code == 0
        assert "running" in status.stdout
        assert "1 client(s) attached" in status.stdout
        stop = runner.invoke(app, ["server", "stop"], env=env)
        assert stop.exit_code == 0
        assert "warning: 1 client(s) attached" in stop.stderr
        assert stop.stdout.strip() == "stopped"
    assert runner.invoke(app, ["server", "status"], env=env).exit_code == 1


def test_tasks_from_the_shell(server: LocalServer, namespace: str) -> None:
    where = ["--url", server.url, "--namespace", namespace]
    with FairQueue(server.url, namespace) as queue:
        done = queue.push(Task(user_id="alice", name="add", keep_result=True, task_id="done"))
        failed = queue.push(Task(user_id="alice", name="add", max_retries=0, task_id="bad"))
        other = queue.push(Task(user_id="bob", name="add", max_retries=0, task_id="bob-bad"))
        waiting = queue.push(Task(user_id="bob", task_id="later", delay=600, keep_result=True))
        leased = {task.task_id: task for task in queue.pop(count=3)}
        queue.finish(leased[done], result={"sum": 3})
        queue.fail(leased[failed], ValueError("no"))
        queue.fail(leased[other], "ValueError: also no")
    shown = runner.invoke(app, ["task", "get", failed, "--json", *where])
    assert shown.exit_code == 0, shown.output
    info = json.loads(shown.stdout)
    assert (info["kind"], info["state"], info["last_error"]) == ("task", "failed", "ValueError: no")
    assert info["errors"][0]["type"] == "ValueError"
    text = runner.invoke(app, ["task", "get", failed, *where]).stdout
    assert "last_error" in text
    # The failed attempts, one line each, then the newest traceback.
    assert re.search(r"\n  #1  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  \S+  ValueError: no\n", text)
    assert text.endswith("traceback of attempt #1:\nValueError: no\n")
    result = runner.invoke(app, ["task", "result", done, *where])
    assert (result.exit_code, json.loads(result.stdout)) == (0, {"sum": 3})
    lost = runner.invoke(app, ["task", "result", failed, *where])
    assert lost.exit_code == 1
    assert "ValueError: no" in lost.output
    timed = runner.invoke(app, ["task", "result", waiting, "--timeout", "0.1", *where])
    assert timed.exit_code == 2
    listed = runner.invoke(app, ["tasks", "--state", "failed", "--tenant", "alice", "--json",
                                 *where])  # fmt: skip
    page = json.loads(listed.stdout)
    assert [row["task_id"] for row in page["tasks"]] == [failed]
    assert page["cursor"] == 0
    table = runner.invoke(app, ["tasks", "--state", "failed", *where], terminal_width=200)
    assert failed in table.stdout
    assert other in table.stdout
    assert runner.invoke(app, ["task", "retry", failed, *where]).stdout.strip() == "queued"
    again = runner.invoke(app, ["task", "retry", failed, *where])
    assert again.exit_code == 1
    assert "is queued" in again.output
    assert runner.invoke(app, ["task", "cancel", waiting, *where]).stdout.strip() == "canceled"
    assert runner.invoke(app, ["task", "cancel", done, *where]).exit_code == 1
    missing = runner.invoke(app, ["task", "get", "nope", *where])
    assert missing.exit_code == 2
    assert "no task with id 'nope'" in missing.output


def test_stats_rows_add_up_and_say_what_they_count(server: LocalServer, namespace: str) -> None:
    where = ["--url", server.url, "--namespace", namespace]
    with FairQueue(server.url, namespace) as queue:
        queue.push_many([Task(user_id="alice"), Task(user_id="alice"), Task(user_id="bob")])
        [leased] = queue.pop(assigned_users=["bob"])
        queue.finish(leased)
        JobQueue(queue).push(Job(name="resize"))  # a strict job: no tenant
    with RedisStorage(server.url, namespace) as storage:
        storage.put_task(PutTaskRequest(1, b"x"))  # a storage task: no tenant
    shown = runner.invoke(app, ["stats", "--json", *where])
    assert shown.exit_code == 0, shown.output
    rows = json.loads(shown.stdout)["rows"]
    assert rows["alice"]["queued"] == 2
    # Rows are the busiest tenants (with ready tasks); bob has none: in "other tenants".
    assert "bob" not in rows
    assert rows["other tenants"] == {**dict.fromkeys(rows["alice"], 0), "pushed": 1, "finished": 1}
    assert rows["all tenants"] == {
        column: rows["alice"][column] + rows["other tenants"][column] for column in rows["alice"]
    }
    assert rows["jobs + storage"]["queued"] == 2
    assert rows["jobs + storage"]["pushed"] == 2
    for column, total in rows["all kinds"].items():
        assert total == rows["all tenants"][column] + rows["jobs + storage"][column]
    assert rows["all kinds"]["pushed"] == 5
    table = runner.invoke(app, ["stats", *where], terminal_width=200).stdout
    assert "jobs + storage" in table
    assert "every kind" in table
    with FairQueue(server.url, namespace) as queue:
        assert stat_rows(queue.stats()) == rows
