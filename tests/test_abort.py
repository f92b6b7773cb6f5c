"""Canceling a task that runs: the engine ends it CANCELED at once (its tenant's slot is
free again, its dependents are canceled) and announces it on the ``abort`` channel; the
worker running it stops the run (an async function gets CancelledError, a task process is
killed, a function on a thread sees ``context.cancelled``) and records nothing more."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from fairque import FairQueue, LeasedTask, Task, TaskState
from fairque.engine.notify import Listener
from fairque.queue.async_client import AsyncQueue, open_async_queue
from fairque.servers.embedded import LocalServer
from fairque.worker import (
    Registry,
    SyncTaskContext,
    TaskContext,
    Worker,
    WorkerConfig,
    WorkerHooks,
    task,
)
from tests.conftest import until

functions = Registry()
seen: list[str] = []  # what the functions saw of their cancellation (in this process)


@task(into=functions, name="waits_async")
async def waits_async(context: TaskContext) -> None:
    await context.log("started")
    try:
        await asyncio.sleep(600)
    except asyncio.CancelledError:
        seen.append(f"cancelled {context.task.task_id}")
        raise


@task(into=functions, name="waits_on_thread")
def waits_on_thread(context: SyncTaskContext) -> str:
    context.log("started")
    deadline = time.monotonic() + 60  # bounded: a broken abort fails the test, not hangs it
    while not context.cancelled and time.monotonic() < deadline:
        time.sleep(0.01)
    seen.append(f"flag {context.task.task_id} {context.cancelled}")
    return "dropped"  # the task is CANCELED already: this is not recorded


@task(into=functions, name="waits_in_process")
def waits_in_process(context: SyncTaskContext) -> None:
    context.log("started")
    time.sleep(600)


@task(into=functions, name="quick")
def quick() -> str:
    return "done"


class Noting(WorkerHooks):
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_success(self, task: LeasedTask, result: Any, seconds: float) -> None:
        self.events.append(("success", task.task_id))

    def on_retry(self, task: LeasedTask, error: str, seconds: float) -> None:
        self.events.append(("retry", task.task_id))

    def on_failure(self, task: LeasedTask, error: str, seconds: float) -> None:
        self.events.append(("failure", task.task_id))

    def on_cancel(self, task: LeasedTask, seconds: float) -> None:
        assert seconds >= 0
        self.events.append(("cancel", task.task_id))


@pytest.mark.cluster
def test_canceling_a_running_task_ends_it_and_frees_its_slot(queue: FairQueue) -> None:
    queue.set_tenant("u", concurrency=1)
    running = queue.push(Task(user_id="u", payload="a"))
    dependent = queue.push(Task(user_id="v", depends_on=(running,)))
    waiting = queue.push(Task(user_id="u", payload="b"))
    [leased] = queue.pop(count=5)
    assert leased.task_id == running
    assert queue.pop(count=5) == []  # the tenant's one slot is taken
    with Listener(queue.executor, queue.abort_channels[0]) as aborts:
        assert queue.cancel(running) is True
        assert aborts.wait_for(running, timeout=10)
    assert queue.cancel(running) is False  # ended: nothing more to cancel
    info = queue.get(running)
    assert info is not None
    assert (info.state, info.last_error) == (TaskState.CANCELED, "canceled")
    gone = queue.get(dependent)
    assert gone is not None
    reason = f"dependency {running} was canceled"
    assert (gone.state, gone.last_error) == (TaskState.CANCELED, reason)
    # The slot is free at once; the worker's late outcome finds its lease gone.
    assert [task.task_id for task in queue.pop(count=5)] == [waiting]
    assert queue.finish_many([leased]) == [running]
    assert queue.tenant("u").running == 1
    stats = queue.stats()
    assert stats.states[TaskState.CANCELED] == 2
    assert stats.states[TaskState.STARTED] == 1


async def run_until_canceled(queue: AsyncQueue, worker: Worker, hooks: Noting, name: str) -> str:
    """Runs ``worker``, pushes a ``name`` task, cancels it once its run has started and
    waits for the worker to stop the run; then checks the worker goes on with more work."""
    running = asyncio.create_task(worker.run_async())
    try:
        task_id = await queue.push(Task(user_id="u", name=name))

        async def started() -> bool:
            info = await queue.get(task_id)
            return info is not None and info.logs == ("started",)

        await until(started, timeout=60)  # a task process takes seconds on a busy host
        assert await queue.cancel(task_id) is True
        await until(lambda: noted(hooks, ("cancel", task_id)), timeout=30)
        after = await queue.push(Task(user_id="u", name="quick", keep_result=True))
        assert await queue.result(after, timeout=60) == "done"
    finally:
        worker.stop()
        await running
    info = await queue.get(task_id)
    assert info is not None
    assert (info.state, info.last_error) == (TaskState.CANCELED, "canceled")
    assert [event for event in hooks.events if event[1] == task_id] == [("cancel", task_id)]
    assert worker.failed == 0
    return task_id


async def noted(hooks: Noting, event: tuple[str, str]) -> bool:
    return event in hooks.events


@pytest.mark.cluster
@pytest.mark.parametrize("shards", [1, 3])
async def test_an_async_run_gets_cancelled_error(
    server: LocalServer, namespace: str, shards: int
) -> None:
    queue = open_async_queue(server.url, namespace, shards)
    hooks = Noting()
    config = WorkerConfig(redis_url=server.url, namespace=namespace, shards=shards)
    task_id = await run_until_canceled(
        queue, Worker(config, functions, hooks=hooks), hooks, "waits_async"
    )
    await queue.close()
    assert f"cancelled {task_id}" in seen


@pytest.mark.one_engine  # the worker's side: the same on every engine
async def test_a_run_on_a_thread_sees_the_flag(
    server: LocalServer, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "fairque")
    queue = open_async_queue(server.url, namespace)
    hooks = Noting()
    config = WorkerConfig(redis_url=server.url, namespace=namespace)
    task_id = await run_until_canceled(
        queue, Worker(config, functions, hooks=hooks), hooks, "waits_on_thread"
    )
    await queue.close()
    assert f"flag {task_id} True" in seen
    said = [record.getMessage() for record in caplog.records]
    assert f"task {task_id}: canceled while it runs; stopping it" in said
    assert not [line for line in said if "lease lost" in line]


@pytest.mark.one_engine
async def test_a_task_process_is_killed(server: LocalServer, namespace: str) -> None:
    queue = open_async_queue(server.url, namespace)
    hooks = Noting()
    config = WorkerConfig(
        redis_url=server.url, namespace=namespace, sync_runner="process", concurrency=1
    )
    # `quick` runs in a new task process afterwards: the killed one is replaced.
    await run_until_canceled(
        queue, Worker(config, functions, hooks=hooks), hooks, "waits_in_process"
    )
    await queue.close()


async def abort_subscribers(queue: AsyncQueue, count: int) -> bool:
    """Whether ``count`` clients subscribe to the namespace's abort channel."""
    channel = queue.abort_channels[0]
    node = await queue.executor.client_for(channel)
    return int((await node.pubsub_shardnumsub(channel))[0][1]) == count


@pytest.mark.one_engine  # the worker's side: the same on every engine
async def test_an_idle_worker_lets_its_abort_subscription_go_and_makes_it_again(
    server: LocalServer, namespace: str
) -> None:
    # Idle for a poll interval with no run: no subscription (a connection the server pays
    # for every second); a task leased makes it again, and its abort stops the run.
    queue = open_async_queue(server.url, namespace, 1)
    hooks = Noting()
    config = WorkerConfig(redis_url=server.url, namespace=namespace, poll_interval_seconds=0.3)
    worker = Worker(config, functions, hooks=hooks)
    running = asyncio.create_task(worker.run_async())
    try:
        await until(lambda: abort_subscribers(queue, 1))
        await until(lambda: abort_subscribers(queue, 0))  # idle for 0.3 s, no run
        task_id = await queue.push(Task(user_id="u", name="waits_async"))
        await until(lambda: abort_subscribers(queue, 1))  # leased: listening again

        async def started() -> bool:
            info = await queue.get(task_id)
            return info is not None and info.logs == ("started",)

        await until(started)
        assert await queue.cancel(task_id) is True
        await until(lambda: noted(hooks, ("cancel", task_id)))
    finally:
        worker.stop()
        await running
        await queue.close()
