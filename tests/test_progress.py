"""Progress and log lines from inside a task or a JQ master job: kept in its record while
the lease is held, bounded in count and size, refused from a holder that lost the lease,
and reported by task functions through their context (async, on a thread)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

import pytest

from fairque import (
    AsyncFairQueue,
    FairQueue,
    InvalidInput,
    Job,
    JobQueue,
    LeaseLost,
    Task,
    TaskState,
)
from fairque.engine.records import MAX_LOG_LINE, MAX_LOG_LINES, MAX_PROGRESS_MESSAGE
from fairque.jobs import Success
from fairque.servers.embedded import LocalServer
from fairque.worker import Registry, SyncTaskContext, TaskContext, Worker, WorkerConfig, task
from tests.conftest import until

pytestmark = pytest.mark.cluster

functions = Registry()


@task(into=functions, name="counting")
async def counting(steps: int, context: TaskContext) -> int:
    for step in range(1, steps + 1):
        await context.log(f"step {step}")
        await context.progress(100 * step / steps, f"{step} of {steps}")
    return steps


@task(into=functions, name="counting_sync")
def counting_sync(steps: int, context: SyncTaskContext) -> int:
    for step in range(1, steps + 1):
        context.log(f"step {step}", "and a second line")
        context.progress(step, "done" if step == steps else "")
    return steps


def test_a_leased_task_reports_progress_and_lines(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="u", name="job"))
    [leased] = queue.pop()
    info = queue.get(task_id)
    assert info is not None
    assert (info.progress, info.progress_message, info.progress_at, info.logs) == (
        None, None, None, ())  # fmt: skip
    assert queue.report(leased, 12.5, "reading", ["opened the file"]) == 1
    assert queue.report(leased, lines=["read 10 rows", "read 20 rows"]) == 3
    info = queue.get(task_id)
    assert info is not None
    assert (info.progress, info.progress_message) == (12.5, "reading")
    assert info.progress_at is not None
    assert info.leased_at is not None
    assert info.leased_at <= info.progress_at
    assert info.logs == ("opened the file", "read 10 rows", "read 20 rows")
    queue.finish(leased, "ok")
    with pytest.raises(LeaseLost):  # the lease ended: nothing more is taken
        queue.report(leased, 99.0)
    info = queue.get(task_id)
    assert info is not None
    assert (info.state, info.progress, len(info.logs)) == (TaskState.FINISHED, 12.5, 3)


def test_reports_are_bounded(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="u", name="job"))
    [leased] = queue.pop()
    flood = [f"line {n}" for n in range(MAX_LOG_LINES + 50)]
    assert queue.report(leased, lines=flood) == MAX_LOG_LINES
    queue.report(leased, 1, "m" * (MAX_PROGRESS_MESSAGE + 50), ["x" * (MAX_LOG_LINE + 50)])
    info = queue.get(task_id)
    assert info is not None
    assert len(info.logs) == MAX_LOG_LINES
    assert info.logs[0] == "line 51"  # the newest kept
    assert info.logs[-1] == "x" * MAX_LOG_LINE
    assert info.progress_message == "m" * MAX_PROGRESS_MESSAGE


def test_a_leased_job_reports_as_a_task_does(queue: FairQueue) -> None:
    jobs = JobQueue(queue)
    job_id = jobs.push(Job(name="resize"))
    [leased] = jobs.pop("w1")
    assert jobs.report(leased.id, leased.lease_token, 40, "half", ["opened"]) == 1
    flood = [f"line {n}" for n in range(MAX_LOG_LINES + 50)]
    assert jobs.report(leased.id, leased.lease_token, lines=flood) == MAX_LOG_LINES
    jobs.report(leased.id, leased.lease_token, 50, "m" * (MAX_PROGRESS_MESSAGE + 50))
    with pytest.raises(InvalidInput) as caught:
        jobs.report(leased.id, leased.lease_token, float("nan"))
    assert caught.value.field == "progress"
    with pytest.raises(LeaseLost):  # a token that never held the lease
        jobs.report(leased.id, "1", 99.0, "stolen", ["stolen"])
    jobs.complete(leased, Success(finished_at=datetime.now(timezone.utc)))
    with pytest.raises(LeaseLost):  # the lease ended: nothing more is taken
        jobs.report(leased.id, leased.lease_token, 99.0, "late", ["late"])
    info = jobs.get(job_id)
    assert info is not None
    assert (info.state, info.progress) == ("finished", 50.0)
    assert info.progress_message == "m" * MAX_PROGRESS_MESSAGE
    assert info.progress_at is not None
    assert (len(info.logs), info.logs[0], info.logs[-1]) == (MAX_LOG_LINES, "line 50", "line 149")


@pytest.mark.parametrize(
    ("given", "field"),
    [
        ({"progress": float("nan")}, "progress"),
        ({"progress": float("inf")}, "progress"),
        ({"progress": True}, "progress"),
        ({"progress": "50"}, "progress"),
        ({"progress": 1, "message": 5}, "message"),
        ({"lines": ["ok", b"bytes"]}, "lines"),
    ],
)
def test_bad_reports_are_refused_and_change_nothing(
    queue: FairQueue, given: dict[str, Any], field: str
) -> None:
    task_id = queue.push(Task(user_id="u", name="job"))
    [leased] = queue.pop()
    with pytest.raises(InvalidInput) as caught:
        queue.report(leased, **given)
    assert caught.value.field == field
    info = queue.get(task_id)
    assert info is not None
    assert (info.progress, info.logs) == (None, ())


@pytest.mark.parametrize("name", ["counting", "counting_sync"])
async def test_task_functions_report_through_their_context(
    server: LocalServer, namespace: str, name: str
) -> None:
    queue = AsyncFairQueue(server.url, namespace)
    task_id = await queue.push(Task(user_id="u", name=name, payload={"args": [3]}))
    worker = Worker(WorkerConfig(redis_url=server.url, namespace=namespace), functions)
    running = asyncio.create_task(worker.run_async())

    async def finished() -> bool:
        info = await queue.get(task_id)
        return info is not None and info.state is TaskState.FINISHED

    await until(finished)
    worker.stop()
    await running
    info = await queue.get(task_id)
    await queue.close()
    assert info is not None
    if name == "counting":
        assert (info.progress, info.progress_message) == (100.0, "3 of 3")
        assert info.logs == ("step 1", "step 2", "step 3")
    else:
        assert (info.progress, info.progress_message) == (3.0, "done")
        assert info.logs[-2:] == ("step 3", "and a second line")
        assert len(info.logs) == 6


@task(into=functions, name="stepped")
async def stepped(context: TaskContext) -> str:
    for step in (1, 2, 3):
        await context.progress(step, f"step {step}")
        await gates["stepped"].wait()  # the test lets each step go once it saw the last
        gates["stepped"].clear()
    return "done"


gates: dict[str, asyncio.Event] = {}  # made in the test's own event loop


async def test_a_producer_waiting_for_the_result_hears_each_report(
    server: LocalServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Woken by each report, never by a periodic read: with an hour between reads, a
    # missed wake-up would leave the wait below to its bound.
    monkeypatch.setattr("fairque.queue.async_client.RECHECK_SECONDS", 3600.0)
    gates["stepped"] = asyncio.Event()
    queue = AsyncFairQueue(server.url, namespace)
    task_id = await queue.push(Task(user_id="u", name="stepped", keep_result=True))
    worker = Worker(WorkerConfig(redis_url=server.url, namespace=namespace), functions)
    running = asyncio.create_task(worker.run_async())
    heard: list[float | None] = []

    def on_progress(info: Any) -> None:
        heard.append(info.progress)
        gates["stepped"].set()  # the next step may go: every report is heard, none skipped

    result = await asyncio.wait_for(queue.result(task_id, 60, on_progress), 60)
    worker.stop()
    await running
    await queue.close()
    assert result == "done"
    assert heard == [1.0, 2.0, 3.0]
