"""XCom: values a task leaves for its dependents, with a TTL (seed 000)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from fairque import AsyncFairQueue, FairQueue, InvalidInput, QueueSettings, TaskState
from fairque.servers.embedded import LocalServer
from fairque.worker import (
    Pipeline,
    Registry,
    SyncTaskContext,
    TaskContext,
    Worker,
    WorkerConfig,
    task,
)
from tests.conftest import wait_for

pytestmark = pytest.mark.cluster

steps = Registry()


@task(into=steps, name="produce", task_id="produce")
async def produce(context: TaskContext) -> None:
    await context.xcom_push("records", [1, 2, 3])


@task(into=steps, name="consume", task_id="consume", depends_on=["produce"])
def consume(context: SyncTaskContext) -> int:
    assert context.run_id is not None
    missing = context.xcom_pull("produce", "absent", default="none")
    records: list[int] = context.xcom_pull("produce", "records", default=[])
    return sum(records) + int(missing == "none")


def test_push_pull_default_and_ttl(queue: FairQueue) -> None:
    queue.xcom_push("t1", "rows", {"count": 3})
    assert queue.xcom_pull("t1", "rows") == {"count": 3}
    assert queue.xcom_pull("t1", "other", default=0) == 0
    assert queue.xcom_pull("t2", "rows") is None
    ttl = queue.redis.pttl(f"{queue.namespace.prefix}xcom:t1")
    assert 24 * 3600 * 1000 - 5000 < ttl <= 24 * 3600 * 1000


def test_values_expire(make_queue: Callable[..., FairQueue]) -> None:
    queue = make_queue(QueueSettings(xcom_ttl=0.05))
    queue.xcom_push("t1", "rows", [1])
    assert queue.xcom_pull("t1", "rows") == [1]
    wait_for(lambda: queue.xcom_pull("t1", "rows", default="gone") == "gone", timeout=5)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda q: q.xcom_push("", "k", 1), "task_id"),
        (lambda q: q.xcom_push("t", "", 1), "key"),
        (lambda q: q.xcom_push("t", "k", object()), "value"),
        (lambda q: q.xcom_push("t", "k", 1, ttl=0), "ttl"),
        (lambda q: q.xcom_pull("t", "bad\nkey"), "key"),
    ],
)
def test_bad_xcom_calls(queue: FairQueue, call: Callable[[FairQueue], object], field: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        call(queue)
    assert raised.value.field == field


async def test_dependents_pull_what_their_dependency_pushed(
    server: LocalServer, namespace: str
) -> None:
    queue = AsyncFairQueue(server.url, namespace)
    run = Pipeline(produce, consume).build(user_id="u", run_id="r7", keep_result=True)
    await queue.push_many(run)
    worker = Worker(WorkerConfig(redis_url=server.url, namespace=namespace), steps)
    running = asyncio.create_task(worker.run_async())
    deadline = asyncio.get_running_loop().time() + 10
    while (info := await queue.get("r7.consume")) is None or info.state is not TaskState.FINISHED:
        assert asyncio.get_running_loop().time() < deadline, info
        await asyncio.sleep(0.01)
    worker.stop()
    await running
    assert info.result == 7  # 1 + 2 + 3, and the default for the absent key
    assert await queue.xcom_pull("r7.produce", "records") == [1, 2, 3]
    await queue.close()
