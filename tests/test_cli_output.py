"""What the CLI prints, for people and for scripts: no id or time is ever cut (a table on
a wide terminal, one block per row on a narrow one), piped listings are plain
tab-separated text, values show as JSON and states by name, every listing has --json with
times as epoch seconds, and a piped ``stats --watch`` keeps what it printed when stopped."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fairque import FairQueue, Job, JobQueue, Task, TaskScheduler
from fairque.cli import app
from fairque.queue import WorkerInfo
from fairque.scheduler import Schedule, TaskTemplate
from tests.conftest import Server, wait_for

runner = CliRunner()
CLI = [sys.executable, "-c", "from fairque.cli import main; main()"]
LONG_TENANT = "tenant-with-a-rather-long-name-of-forty-chars"
LONG_NAME = "reports.render_the_quarterly_report_for_a_customer"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _push_two(server: Server, namespace: str) -> list[str]:
    with FairQueue(server.url, namespace) as queue:
        return [queue.push(Task(user_id=LONG_TENANT, name=LONG_NAME, payload={"n": n}))
                for n in range(2)]  # fmt: skip


def test_piped_listings_are_tab_separated_with_whole_values(server: Server, namespace: str) -> None:
    ids = _push_two(server, namespace)
    shown = runner.invoke(app, ["tasks", "--state", "queued", "--url", server.url,
                                "--namespace", namespace])  # fmt: skip
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[0].split("\t") == [
        "id", "tenant", "name", "state", "priority", "attempts", "created (UTC)"
    ]  # fmt: skip
    rows = [line.split("\t") for line in lines[1:]]
    assert sorted(row[0] for row in rows) == sorted(ids)
    assert {(row[1], row[2]) for row in rows} == {(LONG_TENANT, LONG_NAME)}
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row[6]) for row in rows)
    assert not set(shown.stdout) & set("│┃━─…")


@pytest.mark.parametrize("columns", [80, 200])
def test_on_a_terminal_no_id_name_or_time_is_cut(
    server: Server, namespace: str, columns: int
) -> None:
    ids = _push_two(server, namespace)
    env = {**os.environ, "FORCE_COLOR": "1", "COLUMNS": str(columns), "TTY_COMPATIBLE": "1"}
    shown = subprocess.run([*CLI, "tasks", "--state", "queued", "--url", server.url,
                            "--namespace", namespace], env=env, capture_output=True,
                           text=True, timeout=60, check=False)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    text = ANSI.sub("", shown.stdout)
    assert all(len(line) <= columns for line in text.splitlines()), text
    for task_id in ids:
        assert task_id in text
    assert LONG_TENANT in text
    assert LONG_NAME in text
    assert len(re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", text)) == 2
    assert "…" not in text
    if columns == 200:
        assert "┃" in text or "│" in text  # a table where it fits


def test_task_get_shows_the_states_name_and_values_as_json(server: Server, namespace: str) -> None:
    task_id = _push_two(server, namespace)[0]
    shown = runner.invoke(app, ["task", "get", task_id, "--url", server.url,
                                "--namespace", namespace])  # fmt: skip
    assert shown.exit_code == 0, shown.output
    fields = dict(line.split("\t", 1) for line in shown.stdout.splitlines()[1:])
    assert fields["state"] == "queued"
    assert json.loads(fields["payload"]) == {"n": 0}
    assert "TaskState" not in shown.stdout
    # A leased task: its deadline is a moment, shown as one, like every other time.
    with FairQueue(server.url, namespace) as queue:
        [leased] = queue.pop(assigned_users=[leased_tenant(queue, task_id)])
        queue.report(leased, 42.0, "almost half", ["a line"])
    shown = runner.invoke(app, ["task", "get", leased.task_id, "--url", server.url,
                                "--namespace", namespace])  # fmt: skip
    fields = dict(line.split("\t", 1) for line in shown.stdout.splitlines()[1:])
    for moment in ("leased_at", "lease_deadline", "created_at", "start_time"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", fields[moment]), moment
    assert (fields["progress"], fields["progress_message"]) == ("42.0", "almost half")
    assert json.loads(fields["logs"]) == ["a line"]


def test_task_get_shows_a_jobs_progress_and_log_lines(server: Server, namespace: str) -> None:
    with JobQueue(server.url, namespace) as jobs:
        job_id = jobs.push(Job(name="resize"))
        [leased] = jobs.pop("w1")
        jobs.report(job_id, leased.lease_token, 42.0, "almost half", ["a line"])
    shown = runner.invoke(app, ["task", "get", job_id, "--url", server.url,
                                "--namespace", namespace])  # fmt: skip
    assert shown.exit_code == 0, shown.output
    fields = dict(line.split("\t", 1) for line in shown.stdout.splitlines()[1:])
    assert (fields["kind"], fields["state"]) == ("job", "started")
    assert (fields["progress"], fields["progress_message"]) == ("42.0", "almost half")
    assert json.loads(fields["logs"]) == ["a line"]
    assert fields["progress_at"] >= fields["created_at"]  # both ISO 8601, in UTC


def leased_tenant(queue: FairQueue, task_id: str) -> str:
    info = queue.get(task_id)
    assert info is not None
    return info.user_id


def test_every_listing_has_json_with_times_as_epoch_seconds(server: Server, namespace: str) -> None:
    _push_two(server, namespace)
    with FairQueue(server.url, namespace) as queue:
        queue.register_worker(WorkerInfo("w-1", "host-a", 42, ("add",), 8, 0, 1.7e9), ttl=60)
        queue.set_tenant(LONG_TENANT, weight=3)
    with TaskScheduler(server.url, namespace) as scheduler:
        added = scheduler.add_schedule(Schedule(
            task=TaskTemplate(name="add", user_id="alice"), interval=60,
            start_at=datetime(2030, 1, 1, tzinfo=timezone.utc),
        ))  # fmt: skip
    where = ["--url", server.url, "--namespace", namespace, "--json"]
    listings = {
        ("tasks", "--state", "queued"): "tasks",
        ("tenants",): "tenants",
        ("tenants", "--busiest"): "tenants",
        ("workers",): "workers",
        ("scheduler", "list"): "schedules",
        ("stats",): "rows",
    }
    found = {}
    for command, key in listings.items():
        shown = runner.invoke(app, [*command, *where])
        assert shown.exit_code == 0, (command, shown.output)
        found[command] = json.loads(shown.stdout)[key]
        assert found[command], command
    assert isinstance(found["tasks", "--state", "queued"][0]["created_at"], float)
    assert found["workers",][0]["seen_at"] > 1e9
    schedule = found["scheduler", "list"][0]
    assert schedule["state"] == "active"
    assert schedule["schedule"]["start_at"] == 1893456000.0  # 2030-01-01, not an ISO string
    assert isinstance(schedule["next_run"], float)
    shown = runner.invoke(app, ["scheduler", "show", added, *where[:-1]])
    assert json.loads(shown.stdout) == schedule


def test_a_piped_stats_watch_keeps_what_it_printed_when_stopped(
    server: Server, namespace: str, tmp_path: Path
) -> None:
    _push_two(server, namespace)
    out = tmp_path / "stats.txt"
    with out.open("w") as stdout:
        watching = subprocess.Popen([*CLI, "stats", "--watch", "0.2", "--url", server.url,
                                     "--namespace", namespace], stdout=stdout,
                                    stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        wait_for(lambda: out.read_text().count("all kinds") >= 2, timeout=60)
        watching.send_signal(signal.SIGTERM)
        assert watching.wait(timeout=30) == 0
    finally:
        if watching.poll() is None:
            watching.kill()
        watching.communicate(timeout=10)
    lines = out.read_text().splitlines()
    assert lines.count("tenant\tqueued\tpushed\tfinished\tfailed\tretried\tcanceled") >= 2
    assert f"{LONG_TENANT}\t2\t2\t0\t0\t0\t0" in lines


def test_a_mistyped_option_suggests_no_hidden_one() -> None:
    shown = runner.invoke(app, ["stats", "--redis", "redis://x"])
    assert shown.exit_code == 2
    assert "--rounds" not in shown.output
    assert "No such option: --redis" in shown.output
