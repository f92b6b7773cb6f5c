"""fairque.testing and its pytest plugin: a drain runs queued tasks through the real
engine and the worker's runs, ``run_task`` calls one function with a fake context, and
the plugin's fixtures (used here as a user's tests use them) give each test a queue of its
own, with no conftest code and nothing imported until a fixture is used."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fairque import AsyncFairQueue, FairQueue, InvalidInput, ShardedQueue, TaskState
from fairque.testing import (
    AsyncFakeContext,
    FakeContext,
    async_drain,
    async_run_task,
    drain,
    leased_task,
    run_task,
)
from fairque.worker import Pipeline, Registry, SyncTaskContext, TaskContext, task

functions = Registry()
attempts: dict[str, int] = {}


@task(into=functions, name="add")
def add(x: int, y: int) -> int:
    return x + y


@task(into=functions, name="flaky")
def flaky(key: str, failures: int) -> str:
    """Fails ``failures`` times for ``key``, then succeeds."""
    attempts[key] = attempts.get(key, 0) + 1
    if attempts[key] <= failures:
        raise ValueError(f"attempt {attempts[key]}")
    return "done"


@task(into=functions, name="stubborn", max_retries=1)
def stubborn() -> None:
    raise ValueError("never")


@task(into=functions, name="unsendable")
def unsendable() -> object:
    return object()


@task(into=functions, name="quits")
def quits(context: SyncTaskContext) -> int:
    context.queue.cancel(context.task.task_id)  # as if canceled from outside meanwhile
    return 1


@task(into=functions, name="extract", task_id="extract")
def extract(context: SyncTaskContext) -> None:
    context.xcom_push("rows", [1, 2, 3])


@task(into=functions, name="count", task_id="count", depends_on=["extract"])
def count(context: SyncTaskContext) -> int:
    rows: list[int] = context.xcom_pull("extract", "rows", default=[])
    context.progress(100, f"{len(rows)} rows")
    return len(rows)


@task(into=functions, name="watch")
async def watch(steps: int, context: TaskContext) -> int:
    """Reports progress each step and stops early once canceled."""
    done = 0
    for step in range(steps):
        if context.cancelled:
            break
        await context.progress(step, f"step {step}")
        await context.log(f"did {step}")
        done += 1
    return done


@pytest.fixture
def fairque_functions() -> Registry:
    """This module's functions: the plugin's queues take their declared defaults."""
    return functions


def test_drain_runs_ready_tasks_and_their_retries_and_dependents(fairque_queue: FairQueue) -> None:
    key = fairque_queue.name
    added = fairque_queue.push(add.build(user_id="alice", args=[2, 3]))
    retried = fairque_queue.push(flaky.build(user_id="bob", args=[key, 1]))
    failed = fairque_queue.push(stubborn.build(user_id="bob"))  # max_retries=1, declared
    unknown = fairque_queue.push(add.build(user_id="carol").model_copy(update={"name": "gone"}))
    run = Pipeline(extract, count).build(user_id="dave", run_id="r1")
    fairque_queue.push_many(run)

    ran = drain(fairque_queue, functions)

    endings = [(r.task_id, r.attempt, r.state, r.result, r.error) for r in ran]
    assert sorted(endings, key=str) == sorted([
        (added, 1, "succeeded", 5, None),
        (retried, 1, "retried", None, "ValueError: attempt 1"),
        (retried, 2, "succeeded", "done", None),
        (failed, 1, "retried", None, "ValueError: never"),
        (failed, 2, "failed", None, "ValueError: never"),
        (unknown, 1, "failed", None, "unknown task function 'gone'"),
        ("r1.extract", 1, "succeeded", None, None),
        ("r1.count", 1, "succeeded", 3, None),
    ], key=str)  # fmt: skip
    assert {r.tenant for r in ran if r.task_id == "r1.count"} == {"dave"}
    assert ran.index(next(r for r in ran if r.task_id == "r1.count")) > ran.index(
        next(r for r in ran if r.task_id == "r1.extract")
    )
    infos = {task_id: fairque_queue.get(task_id) for task_id in (added, failed, "r1.count")}
    ended = {task_id: (info.state, info.progress_message) if info else None
             for task_id, info in infos.items()}  # fmt: skip
    assert ended == {added: (TaskState.FINISHED, None), failed: (TaskState.FAILED, None),
                     "r1.count": (TaskState.FINISHED, "3 rows")}  # fmt: skip
    assert drain(fairque_queue, functions) == []


def test_a_success_the_server_did_not_record_says_how_it_ended(fairque_queue: FairQueue) -> None:
    refused = fairque_queue.push(unsendable.build(user_id="alice"))
    canceled = fairque_queue.push(quits.build(user_id="bob"))
    ran = {r.task_id: (r.state, r.result, str(r.error)) for r in drain(fairque_queue, functions)}
    assert ran[refused][:2] == ("failed", None)
    assert ran[refused][2].startswith("result refused")
    assert ran[canceled][:2] == ("canceled", None)


def test_a_delayed_task_runs_only_once_due(fairque_queue: FairQueue) -> None:
    task_id = fairque_queue.push(add.build(user_id="alice", args=[1, 1], delay=0.3))
    assert drain(fairque_queue, functions) == []
    info = fairque_queue.get(task_id)
    assert info is not None
    assert info.state is TaskState.SCHEDULED
    [ran] = drain(fairque_queue, functions, wait_due=30)
    assert (ran.task_id, ran.result) == (task_id, 2)


async def test_async_drain_gives_async_functions_a_real_context(
    fairque_async_queue: AsyncFairQueue,
) -> None:
    task_id = await fairque_async_queue.push(watch.build(user_id="alice", args=[2]))
    [ran] = await async_drain(fairque_async_queue, functions)
    assert (ran.task_id, ran.state, ran.result) == (task_id, "succeeded", 2)
    info = await fairque_async_queue.get(task_id)
    assert info is not None
    assert info.logs == ("did 0", "did 1")


def test_drain_refuses_what_it_cannot_drain(fairque_url: str) -> None:
    sharded = ShardedQueue(fairque_url, "sharded", shards=2)
    with sharded, pytest.raises(InvalidInput, match="one namespace on one server"):
        drain(sharded, functions)
    with FairQueue(fairque_url, "x") as queue, pytest.raises(InvalidInput, match="wait_due"):
        drain(queue, functions, wait_due=-1)


def test_run_task_runs_a_function_as_a_worker_would() -> None:
    context = FakeContext(leased_task(task_id="r1.count"))
    context.xcom["r1.extract", "rows"] = [4, 5]  # what the step it depends on pushed
    assert run_task(count, context=context) == 2
    assert context.progress_reports == [(100, "2 rows")]
    assert run_task(add, 1, y=2) == 3
    with pytest.raises(InvalidInput, match="result: cannot be sent"):
        run_task(unsendable)
    with pytest.raises(InvalidInput, match="is async"):
        run_task(watch, 1)
    with pytest.raises(InvalidInput, match="no parameter named context"):
        run_task(add, 1, 2, context=context)


async def test_a_fake_context_records_and_cancels() -> None:
    context = AsyncFakeContext(cancel_after=2)
    assert await async_run_task(watch, 5, context=context) == 2
    assert context.progress_reports == [(0, "step 0"), (1, "step 1")]
    assert context.lines == ["did 0", "did 1"]
    assert context.cancelled
    with pytest.raises(InvalidInput, match="no queue"):
        context.queue.push  # noqa: B018 - the attribute's lookup is what refuses
    with pytest.raises(InvalidInput, match="not async"):
        await async_run_task(add, 1, 2)


PROJECT_TEST = """
import sys

def test_loading_the_plugin_imported_nothing_of_fairque():
    assert not [name for name in sys.modules if name.split(".")[0] == "fairque"]

def test_a_namespace_of_its_own(fairque_queue, fairque_url):
    from fairque import Task

    assert fairque_url == "{url}"
    assert fairque_queue.tasks("queued").tasks == []
    fairque_queue.push(Task(user_id="a"))

test_another_namespace = test_a_namespace_of_its_own
"""


def test_the_plugin_in_a_project_without_conftest(tmp_path: Path, fairque_url: str) -> None:
    """This suite's own use of the fixtures shows pytest finds the plugin by its entry
    point; here it is loaded alone (the other plugins of this environment take seconds
    to import) in a project of its own."""
    (tmp_path / "test_project.py").write_text(PROJECT_TEST.replace("{url}", fairque_url))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "fairque_pytest",
         "--fairque-url", fairque_url, "test_project.py"],
        cwd=tmp_path, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
