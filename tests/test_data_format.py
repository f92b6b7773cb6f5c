"""Data-format versions: a namespace records the format that wrote it; a release meeting a
newer format refuses in one line and writes nothing; ``fairque upgrade`` says what it
changes and is safe to rerun; data written by the previous release (a dump it made, kept
under tests/data) is taken over online, under a running drain, losing and repeating
nothing."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from typer.testing import CliRunner

from fairque import AsyncFairQueue, FairQueue, NewerDataFormat, Task, TaskState
from fairque.cli import app
from fairque.engine.settings import DATA_FORMAT
from fairque.servers.embedded import LocalServer
from fairque.worker import Registry, Worker, WorkerConfig, task
from tests.conftest import Server, wait_for

runner = CliRunner()
CLI = [sys.executable, "-c", "from fairque.cli import main; main()"]
# Made by the release before formats were recorded (05fa464): 600 tasks named "record"
# (args [n], n = 0..599) of 7 tenants, in namespace "format1"; tenant-3 weighs 3.
PREVIOUS_RELEASE_DUMP = Path(__file__).parent / "data" / "format1.rdb"


def recorded(client: Any, namespace: str) -> bytes | None:
    value: bytes | None = client.hget(f"fq:{{{namespace}}}:settings", "format")
    return value


def newer_format(url: str, namespace: str, tasks: list[Task]) -> dict[bytes, bytes]:
    """Pushes ``tasks``, records a data format newer than this release's in the namespace,
    and returns the server's snapshot: what a refusing release must leave as it is."""
    with FairQueue(url, namespace) as first:
        first.push_many(tasks)
        first.redis.hset(f"fq:{{{namespace}}}:settings", "format", DATA_FORMAT + 1)
        return snapshot(first.redis, namespace)


def snapshot(client: Any, namespace: str) -> dict[bytes, bytes]:
    """Every key of the server with a dump of its value: what a refusal must not change.
    But other namespaces' keys that expire by themselves (other tests' fairness minutes,
    their pops' promises that nothing is due), which may go between two snapshots."""
    own = f"fq:{{{namespace}}}:".encode()
    keys = list(client.scan_iter(count=1000))
    with client.pipeline(transaction=False) as pipe:  # one round trip: the server holds
        for key in keys:  # every earlier test's keys, thousands
            pipe.pttl(key)
            pipe.dump(key)
        replies = pipe.execute()
    return {
        key: dumped
        for key, expires, dumped in zip(keys, replies[::2], replies[1::2], strict=True)
        if key.startswith(own) or (expires < 0 and not key.endswith(b":maintenance:quiet"))
    }


def test_a_namespace_records_the_format_at_its_first_call(server: Server, namespace: str) -> None:
    with FairQueue(server.url, namespace) as queue:
        assert recorded(queue.redis, namespace) is None
        queue.stats()
        assert recorded(queue.redis, namespace) == str(DATA_FORMAT).encode()


@pytest.mark.one_engine
def test_data_of_a_newer_format_is_refused_and_nothing_is_written(
    server: Server, namespace: str
) -> None:
    before = newer_format(server.url, namespace, [Task(user_id="a", name="n")])
    with FairQueue(server.url, namespace) as queue:
        with pytest.raises(NewerDataFormat) as refused:
            queue.push(Task(user_id="b", name="n"))
        assert str(refused.value) == (
            f"namespace {namespace} holds data format {DATA_FORMAT + 1}, newer than this "
            f"fairque reads (format {DATA_FORMAT}): upgrade fairque here before it uses the "
            "namespace"
        )
        with pytest.raises(NewerDataFormat):  # and at every call after, not only the first
            queue.pop()
        assert snapshot(queue.redis, namespace) == before
    shown = runner.invoke(app, ["stats", "--url", server.url, "--namespace", namespace])
    assert shown.exit_code == 2
    assert shown.stderr.strip().splitlines() == [f"error: {refused.value}"]
    upgraded = runner.invoke(app, ["upgrade", "--url", server.url, "--namespace", namespace])
    assert upgraded.exit_code == 2
    assert upgraded.stderr.strip() == f"error: {refused.value}"


async def test_no_call_leaves_before_the_first_use_check_is_answered(
    server: Server, namespace: str
) -> None:
    before = newer_format(server.url, namespace, [Task(user_id="a", name="n")])
    async with AsyncFairQueue(server.url, namespace) as queue:
        # Sent together: the first carries the check, the others wait for its answer
        # (before, they went out beside it, and the pushes and the pop were made).
        calls = [queue.push(Task(user_id="b", name="n")), queue.pop(count=5),
                 queue.push(Task(user_id="c", name="n"))]  # fmt: skip
        replies = await asyncio.gather(*calls, return_exceptions=True)
        assert [type(reply) for reply in replies] == [NewerDataFormat] * 3
    with redis.Redis.from_url(server.url) as client:
        assert snapshot(client, namespace) == before


refusing = Registry()


@task(into=refusing, name="n")
def never(n: int) -> None:
    raise AssertionError("a release that refuses the namespace ran a task of it")


@pytest.mark.one_engine
def test_a_worker_on_a_newer_format_writes_nothing_however_its_first_calls_race(
    server: Server, namespace: str, tmp_path: Path
) -> None:
    # A worker sends its first calls together (its pop, its wait, its registry entry);
    # none may leave before the one that refuses the namespace is answered.
    tasks = [Task(user_id=f"u{n}", name="n", payload={"args": [n]}) for n in range(5)]
    before = newer_format(server.url, namespace, tasks)
    config = WorkerConfig(redis_url=server.url, namespace=namespace)
    for _ in range(20):
        with pytest.raises(NewerDataFormat):
            asyncio.run(Worker(config, refusing, check_eviction=False).run_async())
        with redis.Redis.from_url(server.url) as client:
            assert snapshot(client, namespace) == before
    (tmp_path / "tasks.py").write_text(NOOP)
    args = ["worker", "--tasks", "tasks", "--processes", "4", "--url", server.url,
            "--namespace", namespace]  # fmt: skip
    for _ in range(3):
        ran = subprocess.run([*CLI, *args], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120, check=False)  # fmt: skip
        assert ran.returncode == 2, ran.stderr
        assert ran.stderr.strip().splitlines() == [
            f"error: namespace {namespace} holds data format {DATA_FORMAT + 1}, newer than "
            f"this fairque reads (format {DATA_FORMAT}): upgrade fairque here before it "
            "uses the namespace"
        ]
        with redis.Redis.from_url(server.url) as client:
            assert snapshot(client, namespace) == before


@pytest.mark.one_engine
def test_upgrade_says_what_it_changes_and_is_safe_to_rerun(server: Server, namespace: str) -> None:
    args = ["upgrade", "--url", server.url, "--namespace", namespace]
    dry = runner.invoke(app, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.strip().splitlines() == [
        f"{namespace}: format 2 keeps fair tasks in lanes by task name: builds their entries "
        "from format 1's queues",
        f"{namespace}: data format none recorded (written before formats were, format 1) "
        f"-> {DATA_FORMAT}: records it (dry run: nothing written)",
    ]
    with redis.Redis.from_url(server.url) as client:
        assert recorded(client, namespace) is None
        done = runner.invoke(app, args)
        assert done.exit_code == 0, done.output
        assert done.stdout.strip().endswith(f"-> {DATA_FORMAT}: records it; done")
        assert recorded(client, namespace) == str(DATA_FORMAT).encode()
    again = runner.invoke(app, args)
    assert again.stdout.strip() == f"{namespace}: data format {DATA_FORMAT}, current: nothing to do"


def test_the_version_names_the_release_and_its_data_format() -> None:
    shown = runner.invoke(app, ["--version"])
    assert shown.exit_code == 0
    assert shown.stdout.startswith("fairque ")
    assert shown.stdout.strip().endswith(f"(data format {DATA_FORMAT})")


TASKS = textwrap.dedent("""
    import os

    import redis

    from fairque import task

    runs = redis.Redis.from_url(os.environ["RUNS_URL"])


    @task(name="record")
    def record(n: int) -> None:
        runs.hincrby("runs", str(n), 1)
""")


@pytest.fixture
def previous_release_data() -> Iterator[LocalServer]:
    """A Valkey started on the previous release's dump (the embedded Valkey reads it)."""
    server = LocalServer()
    shutil.copy(PREVIOUS_RELEASE_DUMP, server.folder / "dump.rdb")
    with server:
        yield server


@pytest.mark.one_engine
def test_the_previous_release_data_is_taken_over_under_a_running_drain(
    previous_release_data: LocalServer, tmp_path: Path
) -> None:
    url, namespace = previous_release_data.url, "format1"
    client = redis.Redis.from_url(url)
    assert recorded(client, namespace) is None
    (tmp_path / "tasks.py").write_text(TASKS)
    env = {**os.environ, "RUNS_URL": url, "FAIRQUE_GRACE_SECONDS": "5"}
    args = ["worker", "--tasks", "tasks", "--url", url, "--namespace", namespace]
    with (tmp_path / "worker.txt").open("w") as said:
        drain = subprocess.Popen([*CLI, *args, "--concurrency", "4"], cwd=tmp_path, env=env,
                                 stdout=said, stderr=said)  # fmt: skip
    try:
        wait_for(lambda: client.hlen("runs") > 0, timeout=60)  # it drains: upgrade meanwhile
        upgraded = runner.invoke(app, ["upgrade", "--url", url, "--namespace", namespace])
        assert upgraded.exit_code == 0, upgraded.output
        assert recorded(client, namespace) == str(DATA_FORMAT).encode()
        with FairQueue(url, namespace) as queue:
            wait_for(lambda: queue.stats().states[TaskState.FINISHED] == 600, timeout=120)
            states = queue.stats().states
            assert states[TaskState.QUEUED] == states[TaskState.FAILED] == 0
            assert queue.tenant("tenant-3").weight == 3  # what the old release set still holds
    finally:
        drain.send_signal(signal.SIGTERM)
        assert drain.wait(timeout=60) == 0, (tmp_path / "worker.txt").read_text()
    runs = {int(n): int(count) for n, count in client.hgetall("runs").items()}
    assert runs == dict.fromkeys(range(600), 1)  # none lost, none run twice
    client.close()


NOOP = "from fairque import task\n\n\n@task\ndef noop() -> None:\n    pass\n"
COMMANDS = {
    "worker": ["worker", "--tasks", "tasks"],
    "scheduler run": ["scheduler", "run"],
    "master": ["master", "--port", "0"],
    "dashboard": ["dashboard", "--port", "0"],
    "storage-worker": ["storage-worker", "--contract", "queues.yaml", "--handlers", "tasks:H"],
    "storage-manager": ["storage-manager"],
}


@pytest.mark.one_engine
@pytest.mark.parametrize("command", COMMANDS)
def test_every_long_running_command_refuses_a_newer_format_in_one_line(
    command: str, server: Server, namespace: str, tmp_path: Path
) -> None:
    (tmp_path / "tasks.py").write_text(NOOP + "\n\nH = {'jobs': None}\n")
    (tmp_path / "queues.yaml").write_text("queues: [{id: 3, name: jobs, fields: {}}]\n")
    with redis.Redis.from_url(server.url) as client:
        client.hset(f"fq:{{{namespace}}}:settings", "format", DATA_FORMAT + 1)
    args = [*COMMANDS[command], "--url", server.url, "--namespace", namespace]
    ran = subprocess.run([*CLI, *args], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120, check=False)  # fmt: skip
    assert ran.returncode == 2, ran.stderr
    errors = [line for line in ran.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: namespace {namespace} holds data format {DATA_FORMAT + 1}, newer than this "
        f"fairque reads (format {DATA_FORMAT}): upgrade fairque here before it uses the namespace"
    ], ran.stderr
    assert "Traceback" not in ran.stderr
