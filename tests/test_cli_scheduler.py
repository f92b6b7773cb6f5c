"""``fairque scheduler``: schedules managed from the command line, on a real server."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from typer.testing import CliRunner

from fairque import QueueSettings
from fairque.cli import app
from fairque.runners.scheduler import AsyncTaskScheduler, TaskScheduler
from fairque.scheduler import SchedulerConfig, ScheduleState
from fairque.servers.embedded import LocalServer, free_port
from tests.conftest import wait_for

runner = CliRunner()


@pytest.fixture
def scheduler(
    server: LocalServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TaskScheduler]:
    monkeypatch.setenv("FAIRQUE_REDIS_URL", server.url)
    monkeypatch.setenv("FAIRQUE_NAMESPACE", namespace)
    with TaskScheduler(server.url, namespace) as made:
        yield made


def invoke(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, ["scheduler", *args])
    assert result.exit_code == code, result.output
    return result.output


def test_add_list_show_update_pause_resume_remove(scheduler: TaskScheduler) -> None:
    sid = invoke("add", "--task", "report", "--user", "alice", "--cron", "0 7 * * mon-fri",
                 "--timezone", "Asia/Tokyo", "--args", "[3]", "--id", "daily").strip()  # fmt: skip
    assert sid == "daily"
    info = scheduler.get_schedule(sid)
    assert info.schedule.cron == "0 7 * * mon-fri"
    assert info.schedule.task.args == [3]
    assert "daily" in invoke("list")
    shown = json.loads(invoke("show", sid))
    assert shown["schedule"]["timezone"] == "Asia/Tokyo"
    assert shown["state"] == "active"
    invoke("update", sid, "--interval", "30", "--priority", "5", "--kwargs", '{"a": 1}')
    info = scheduler.get_schedule(sid)
    assert (info.schedule.interval, info.schedule.cron) == (30, None)
    assert (info.schedule.task.priority, info.schedule.task.kwargs) == (5, {"a": 1})
    assert info.schedule.task.args == [3]  # the rest of the template is kept
    assert invoke("pause", sid).strip() == "paused"
    assert scheduler.get_schedule(sid).state is ScheduleState.PAUSED
    assert "ok" in invoke("health")  # nothing active, nothing to run it needed
    assert invoke("resume", sid).strip() == "active"
    # An active schedule and no scheduler instance running: nothing submits its runs.
    output = invoke("health", code=2)
    assert output.startswith("error")
    assert "1 active schedule(s) and no live scheduler instance" in output
    assert "instances: 0 live, 0 stale, 0 stopped; schedules: 1 active of 1" in output
    assert "removed daily" in invoke("remove", sid)
    assert scheduler.list_schedules() == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cron", "61 * * * *"], "minute field: 61 out of range 0-59"),
        (["--cron", "* * * * *", "--timezone", "Mars/Base"], "unknown time zone"),
        (["--interval", "5", "--args", "[1,"], "--args: not valid JSON"),
        (["--interval", "5", "--missed", "often"], "missed"),
        ([], "give either cron or interval"),
    ],
)
def test_bad_input_exits_2_naming_the_problem(
    scheduler: TaskScheduler, args: list[str], message: str
) -> None:
    output = invoke("add", "--task", "t", "--user", "u", *args, code=2)
    assert message in " ".join(output.split())
    assert scheduler.list_schedules() == []


def test_an_unknown_schedule_exits_2(scheduler: TaskScheduler) -> None:
    assert "no schedule with id 'nope'" in invoke("remove", "nope", code=2)
    assert "no schedule with id 'nope'" in invoke("update", "nope", "--user", "x", code=2)


def test_health_exits_1_with_a_failed_schedule(
    scheduler: TaskScheduler, server: LocalServer, namespace: str
) -> None:
    scheduler.list_schedules()  # connected before the clock is read
    start = datetime.now(timezone.utc) + timedelta(milliseconds=200)
    task = {"name": "t", "user_id": "u", "args": ["x" * 500]}
    sid = scheduler.add_schedule(interval=60, start_at=start, task=task)
    wait_for(lambda: time.time() > start.timestamp() + 0.05)
    # An instance that refuses the payload, with no retries: the schedule fails at once.
    refusing = AsyncTaskScheduler(
        server.url, namespace, config=SchedulerConfig(max_submit_retries=0),
        settings=QueueSettings(max_payload_bytes=100),
    )  # fmt: skip

    async def one_cycle() -> None:
        await refusing.runner.cycle()
        await refusing.close()

    asyncio.run(one_cycle())
    assert scheduler.get_schedule(sid).state is ScheduleState.FAILED
    output = invoke("health", code=1)
    assert "warning" in output
    assert sid in output


@pytest.mark.parametrize("command", [["list"], ["run"], ["remove", "x"], ["health"]])
def test_an_unreachable_server_is_named_in_one_line(command: list[str]) -> None:
    port = free_port()
    output = invoke(*command, "--url", f"redis://127.0.0.1:{port}", code=2)
    assert f"127.0.0.1:{port}" in output
    assert "cannot reach the server" in output or "does not answer" in output
    assert "Traceback" not in output
