"""The fairque command: demo and the embedded server's status."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from fairque import FairQueue, ShardedQueue, Task, demo
from fairque.cli import app
from fairque.config import URL_ENV
from fairque.engine.connect import sync_client
from fairque.queue import WorkerInfo
from fairque.servers.embedded import HOME_ENV, LocalServer
from tests.conftest import namespace_keys

runner = CliRunner()


def test_demo_runs_and_summarises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(URL_ENV, raising=False)
    result = runner.invoke(app, ["demo", "--count", "60", "--tenants", "3"])
    assert result.exit_code == 0, result.output
    match = re.search(r"finished by completion (\d+) of (\d+)", result.output)
    assert match is not None
    assert int(match.group(2)) == 62  # 60 tasks and 2 critical ones
    assert "Critical tasks of big" in result.output


def test_demo_small_tenants_finish_before_the_big_one(server: LocalServer) -> None:
    # Big's 480 tasks take ~150 ms to drain at 5 ms each; the small tenants' bursts end
    # after ~50 ms: a wide margin for the claim below.
    summary = demo.run(server.url, tenants=4, tasks=800, console=Console(quiet=True),
                       work_seconds=0.005)  # fmt: skip
    small = [f"small-{n}" for n in (1, 2, 3)]
    assert len(summary.completions) == 802
    assert summary.mean_position(small) < summary.mean_position([demo.BIG])
    assert max(summary.critical_positions) < summary.mean_position([demo.BIG])


def test_server_status_and_stop_without_a_server(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    status = runner.invoke(app, ["server", "status"])
    assert status.exit_code == 1  # a script can test it: `fairque server status || ...`
    assert "not running" in status.output
    stop = runner.invoke(app, ["server", "stop"])
    assert "was not running" in stop.output


def test_bad_options_are_refused() -> None:
    result = runner.invoke(app, ["demo", "--tenants", "1"])
    assert result.exit_code != 0
    assert "tenants" in result.output


@pytest.mark.cluster
def test_push_then_stats(server: LocalServer, namespace: str) -> None:
    where = ["--url", server.url, "--namespace", namespace]
    pushed = runner.invoke(app, ["push", "add", "--user", "alice", "--args", "[1, 2]", *where])
    assert pushed.exit_code == 0, pushed.output
    task_id = pushed.stdout.strip()
    with FairQueue(server.url, namespace) as queue:
        info = queue.get(task_id)
    assert info is not None
    assert (info.name, info.user_id, info.payload) == (
        "add",
        "alice",
        {"args": [1, 2], "kwargs": {}},
    )
    shown = runner.invoke(app, ["stats", *where])
    assert shown.exit_code == 0
    assert "alice" in shown.output
    assert "queued 1" in shown.output
    watched = runner.invoke(app, ["stats", "--watch", "0.01", "--count", "2", *where])
    assert watched.exit_code == 0
    assert "alice" in watched.output


def test_push_warns_when_no_live_worker_serves_the_function(
    server: LocalServer, namespace: str
) -> None:
    where = ["--url", server.url, "--namespace", namespace]
    pushed = runner.invoke(app, ["push", "add", "--user", "alice", *where])
    assert pushed.exit_code == 0
    assert "no live worker serves add" in pushed.stderr
    with FairQueue(server.url, namespace) as queue:
        queue.register_worker(WorkerInfo("w-1", "host-a", 42, ("add",), 8, 0, 1.7e9), ttl=60)
        pushed = runner.invoke(app, ["push", "add", "--user", "alice", *where])
        assert pushed.exit_code == 0
        assert "warning" not in pushed.stderr
        listed = runner.invoke(app, ["workers", *where])
        assert listed.exit_code == 0
        assert "w-1" in listed.stdout
        assert "host-a" in listed.stdout
        queue.unregister_worker("w-1")
    assert "no live worker" in runner.invoke(app, ["workers", *where]).stdout


READS = (
    ["stats"], ["stats", "--json"], ["workers"], ["tasks", "--state", "failed"], ["tenants"],
    ["tenants", "--busiest"], ["tenant", "show", "alice"], ["limits"], ["limit", "show", "add"],
    ["settings", "show"], ["scheduler", "list"], ["scheduler", "health"],
    ["bulk", "retry", "--dry-run"], ["bulk", "delete", "--state", "finished"],
)  # fmt: skip
LOOKUPS = (["task", "get", "t1"], ["task", "result", "t1"], ["task", "cancel", "t1"],
           ["scheduler", "show", "s1"])  # fmt: skip


def test_a_read_of_a_namespace_nobody_used_writes_nothing_and_says_so(
    server: LocalServer, namespace: str
) -> None:
    client = sync_client(server.url)
    for command in (*READS, *LOOKUPS):
        done = runner.invoke(app, [*command, "--url", server.url, "--namespace", namespace])
        said = f"{command}: {done.output}"
        assert done.exit_code == (2 if command in LOOKUPS else 0), said
        assert f"namespace {namespace} holds no data" in done.stderr, said
        assert done.stdout == "", said
        assert namespace_keys(client, namespace) == {}, said
    with FairQueue(server.url, namespace) as queue:  # once a client has written: figures
        queue.push(Task(user_id="alice", payload=1))
    shown = runner.invoke(app, ["stats", "--url", server.url, "--namespace", namespace])
    assert (shown.exit_code, shown.stderr) == (0, ""), shown.output
    client.close()


@pytest.mark.cluster
def test_push_and_stats_of_a_sharded_queue(server: LocalServer, namespace: str) -> None:
    where = ["--url", server.url, "--namespace", namespace, "--shards", "3"]
    for user in ("alice", "bob", "erin", "grace"):
        pushed = runner.invoke(app, ["push", "add", "--user", user, *where])
        assert pushed.exit_code == 0, pushed.output
    with ShardedQueue(server.url, namespace, shards=3) as queue:
        assert queue.shard_for("alice").stats().tenants.keys() == {"alice", "bob"}
        assert queue.shard_for("erin").stats().tenants.keys() == {"erin", "grace"}
    shown = runner.invoke(app, ["stats", *where])
    assert "queued 4" in shown.output
    assert runner.invoke(app, ["stats", *where[:-1], "0"]).exit_code != 0


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["--args", "[1,"], "--args"),
        (["--kwargs", "[]x"], "--kwargs"),
        (["--args", '{"a": 1}'], "--args: must be a JSON list"),
        (["--args", '"alice"'], "--args: must be a JSON list"),
        (["--kwargs", "[1]"], "--kwargs: must be a JSON object"),
        (["--priority", "9"], "priority"),
        (["--user", ""], "user_id"),
    ],
)
def test_push_refuses_bad_input(
    server: LocalServer, namespace: str, arguments: list[str], named: str
) -> None:
    base = ["push", "add", "--user", "u", "--url", server.url, "--namespace", namespace]
    result = runner.invoke(app, [*base, *arguments])
    assert result.exit_code == 2
    assert named in result.output
    with FairQueue(server.url, namespace) as queue:
        assert queue.stats().counters.get("pushed", 0) == 0  # refused before anything


def test_worker_refuses_an_unknown_tasks_module() -> None:
    result = runner.invoke(app, ["worker", "--tasks", "no_such_module_here", "--url", "redis://x"])
    assert result.exit_code == 2
    assert "no_such_module_here" in result.output


def test_worker_refuses_a_bad_config_file(tmp_path: Path) -> None:
    config = tmp_path / "worker.yaml"
    config.write_text("worker:\n  concurrency: many\n")
    result = runner.invoke(app, ["worker", "-c", str(config)])
    assert result.exit_code == 2
    assert "concurrency" in result.output


def test_worker_refuses_a_bad_shard_count() -> None:
    result = runner.invoke(app, ["worker", "--shards", "0", "--url", "redis://x"])
    assert result.exit_code == 2
    assert "shards" in result.output


def test_tenant_shares_from_the_shell(server: LocalServer, namespace: str) -> None:
    where = ["--url", server.url, "--namespace", namespace]
    with FairQueue(server.url, namespace) as queue:
        queue.push_many([Task(user_id="alice", payload=i) for i in range(3)])
        shown = runner.invoke(app, ["tenant", "show", "alice", *where])
        assert shown.exit_code == 0, shown.output
        assert "served" in shown.output
        changed = runner.invoke(
            app, ["tenant", "set", "alice", "--weight", "3", "--rate", "5", "--period", "60",
                  "--json", *where],
        )  # fmt: skip
        assert changed.exit_code == 0, changed.output
        assert '"weight": 3' in changed.stdout
        assert queue.tenant("alice").rate == 5
        paused = runner.invoke(app, ["tenant", "pause", "alice", *where])
        assert paused.exit_code == 0
        assert "paused alice: 3 ready tasks wait" in paused.output
        assert queue.pop(count=3) == []
        listed = runner.invoke(app, ["tenants", *where])
        assert "alice" in listed.output
        assert "paused" in listed.output
        assert runner.invoke(app, ["tenant", "resume", "alice", *where]).exit_code == 0
        assert len(queue.pop(count=3)) == 3


def test_tenants_busiest_first_a_page_at_a_time(server: LocalServer, namespace: str) -> None:
    where = ["--url", server.url, "--namespace", namespace]
    with FairQueue(server.url, namespace) as queue:
        queue.push_many([Task(user_id=f"t{n}") for n in range(3) for _ in range(n + 1)])
    first = runner.invoke(app, ["tenants", "--busiest", "--limit", "2", "--json", *where])
    assert first.exit_code == 0, first.output
    page = json.loads(first.stdout)
    assert [(row["tenant"], row["queued"]) for row in page["tenants"]] == [("t2", 3), ("t1", 2)]
    more = ["--cursor", str(page["cursor"])]
    rest = runner.invoke(app, ["tenants", "--busiest", "--limit", "2", *more, *where])
    assert "t0" in rest.stdout
    assert "more:" not in rest.stdout
    table = runner.invoke(app, ["tenants", "--busiest", "--limit", "2", *where])
    assert f"more: --busiest --cursor {page['cursor']}" in table.stdout
    bad = runner.invoke(app, ["tenants", "--busiest", "--limit", "0", *where])
    assert bad.exit_code == 2
    assert "count" in bad.output
    assert "Traceback" not in bad.output


def test_task_name_limits_from_the_shell(server: LocalServer, namespace: str) -> None:
    where = ["--url", server.url, "--namespace", namespace]
    with FairQueue(server.url, namespace) as queue:
        queue.push_many([Task(user_id=f"u{n}", name="render") for n in range(3)])
        changed = runner.invoke(
            app, ["limit", "set", "render", "--concurrency", "2", "--json", *where]
        )
        assert changed.exit_code == 0, changed.output
        assert json.loads(changed.stdout)["concurrency"] == 2
        assert len(queue.pop(count=3, names=["render"])) == 2
        shown = runner.invoke(app, ["limit", "show", "render", *where])
        assert "at its concurrency limit" in shown.stdout
        paused = runner.invoke(app, ["limit", "pause", "render", *where])
        assert paused.exit_code == 0
        assert "paused render: its tasks wait" in paused.output
        listed = runner.invoke(app, ["limits", *where])
        assert "render" in listed.stdout
        assert "paused" in listed.stdout
        assert runner.invoke(app, ["limit", "resume", "render", *where]).exit_code == 0
        assert not queue.limits("render").paused
        bad = runner.invoke(app, ["limit", "set", "render", "--rate", "-1", *where])
        assert bad.exit_code == 2
        assert "rate" in bad.output
        assert "Traceback" not in bad.output
        assert queue.limits("render").rate == 0


@pytest.mark.parametrize(
    ("arguments", "named"),
    [(["--weight", "0"], "weight"), (["--rate", "5.5"], "rate"), ([], "nothing to set")],
)
def test_tenant_set_refuses_bad_shares_in_one_line(
    server: LocalServer, namespace: str, arguments: list[str], named: str
) -> None:
    where = ["--url", server.url, "--namespace", namespace]
    result = runner.invoke(app, ["tenant", "set", "alice", *arguments, *where])
    assert result.exit_code == 2
    assert named in result.output
    assert "Traceback" not in result.output
    with FairQueue(server.url, namespace) as queue:
        assert queue.tenants_with_shares().tenants == []
