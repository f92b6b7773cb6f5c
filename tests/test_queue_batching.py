"""Auto-batching of the asyncio client: concurrent pushes go in one script call, and
each caller still gets its own id or its own error (fairque/queue/batching.py)."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

import pytest

from fairque import AsyncFairQueue, DuplicateTask, InvalidInput, Task, TaskState
from fairque.engine.async_executor import AsyncExecutor
from fairque.engine.calls import Call
from fairque.engine.connect import AsyncClient
from fairque.servers.embedded import LocalServer

pytestmark = pytest.mark.cluster
T = TypeVar("T")


class CountingExecutor(AsyncExecutor):
    """A real executor that also counts the script calls it sends."""

    def __init__(self, client: AsyncClient) -> None:
        super().__init__(client)
        self.calls: list[str] = []

    async def execute(self, call: Call[T], since: int | None = None) -> T:
        self.calls.append(call.script.name)
        return await super().execute(call, since)


@pytest.fixture
async def counted(server: LocalServer, namespace: str) -> Any:
    executor = CountingExecutor(AsyncExecutor.connect(server.url).client)
    queue = AsyncFairQueue(namespace=namespace, executor=executor)
    yield queue, executor
    await queue.close()
    await executor.close()


async def test_100_concurrent_pushes_land_in_few_calls(counted: Any) -> None:
    queue, executor = counted
    tasks = [Task(user_id=f"u{i % 7}", payload={"n": i}) for i in range(100)]
    ids = await asyncio.gather(*(queue.push(task) for task in tasks))
    assert len(set(ids)) == 100
    pushes = [name for name in executor.calls if name == "queue/push"]
    assert 1 <= len(pushes) < 10  # coalesced, not one call per push
    for task_id, task in zip(ids, tasks, strict=True):
        info = await queue.get(task_id)
        assert info is not None
        assert (info.user_id, info.payload, info.state) == (
            task.user_id,
            task.payload,
            TaskState.QUEUED,
        )
    assert (await queue.stats()).counters["pushed"] == 100


async def test_pushes_awaited_in_turn_keep_their_order(aqueue: AsyncFairQueue) -> None:
    async def producer(tenant: str) -> list[str]:
        return [await aqueue.push(Task(user_id=tenant, payload=i)) for i in range(15)]

    made = await asyncio.gather(*(producer(f"p{n}") for n in range(5)))
    leased = await aqueue.pop(count=100)
    for tenant, ids in zip([f"p{n}" for n in range(5)], made, strict=True):
        assert [task.task_id for task in leased if task.user_id == tenant] == ids


async def test_one_bad_task_in_a_burst_fails_only_its_caller(aqueue: AsyncFairQueue) -> None:
    taken = await aqueue.push(Task(user_id="a", task_id="taken"))
    burst = [Task(user_id="b", payload=i) for i in range(30)]
    burst[5] = Task(user_id="b", task_id="taken")  # refused by the script: a duplicate
    burst[12] = Task(user_id="b", depends_on=("nowhere",))  # an unknown dependency
    burst[20] = Task(user_id="b", task_id="twice")
    burst[21] = Task(user_id="b", task_id="twice")  # the same id twice in the burst
    burst[25] = Task(user_id="b", payload=object())  # refused before it is sent
    results = await asyncio.gather(*(aqueue.push(t) for t in burst), return_exceptions=True)
    assert isinstance(results[5], DuplicateTask)
    assert isinstance(results[12], InvalidInput)
    assert results[12].field == "depends_on"
    assert results[20] == "twice"
    assert isinstance(results[21], DuplicateTask)
    assert isinstance(results[25], InvalidInput)
    assert results[25].field == "payload"
    refused = {5, 12, 21, 25}
    stored = [r for i, r in enumerate(results) if i not in refused]
    assert all(isinstance(r, str) for r in stored)
    assert len(set(stored)) == len(burst) - len(refused)
    for index, task_id in enumerate(results):
        if index not in refused:
            info = await aqueue.get(str(task_id))
            assert info is not None
            assert info.payload == burst[index].payload
    assert (await aqueue.get(taken)) is not None
    assert (await aqueue.stats()).counters["pushed"] == 1 + len(stored)


async def test_a_task_depending_on_one_of_the_same_burst(aqueue: AsyncFairQueue) -> None:
    child = Task(user_id="c", task_id="child", depends_on=("parent",))
    parent = Task(user_id="c", task_id="parent")
    assert list(await asyncio.gather(aqueue.push(child), aqueue.push(parent))) == [
        "child",
        "parent",
    ]
    info = await aqueue.get("child")
    assert info is not None
    assert (info.state, info.blocked_by) == (TaskState.DEFERRED, ("parent",))


async def test_a_caller_cancelled_before_the_send_pushes_nothing(aqueue: AsyncFairQueue) -> None:
    burst = [Task(user_id="d", task_id=f"t{i}") for i in range(20)]
    callers = [asyncio.create_task(aqueue.push(task)) for task in burst]
    await asyncio.sleep(0)  # one turn: every caller has queued its push, none is sent
    callers[7].cancel()
    results = await asyncio.gather(*callers, return_exceptions=True)
    assert isinstance(results[7], asyncio.CancelledError)
    assert [r for i, r in enumerate(results) if i != 7] == [f"t{i}" for i in range(20) if i != 7]
    assert await aqueue.get("t7") is None
    assert (await aqueue.stats()).counters["pushed"] == 19


async def test_a_caller_cancelled_in_flight_loses_or_duplicates_nothing(
    aqueue: AsyncFairQueue,
) -> None:
    await aqueue.push(Task(user_id="e"))  # the script is loaded, settings written
    burst = [Task(user_id="e", task_id=f"t{i}") for i in range(20)]
    callers = [asyncio.create_task(aqueue.push(task)) for task in burst]
    await asyncio.sleep(0)  # the callers queue their pushes
    await asyncio.sleep(0)  # the sender takes them and sends
    callers[3].cancel()
    results = await asyncio.gather(*callers, return_exceptions=True)
    assert isinstance(results[3], asyncio.CancelledError)
    assert [r for i, r in enumerate(results) if i != 3] == [f"t{i}" for i in range(20) if i != 3]
    cancelled_stored = await aqueue.get("t3") is not None  # sent already, or not: both fine
    assert (await aqueue.stats()).counters["pushed"] == 1 + 19 + cancelled_stored
    leased = await aqueue.pop(count=100)
    assert len(leased) == len({task.task_id for task in leased}) == 1 + 19 + cancelled_stored


async def test_close_sends_the_pushes_still_waiting(server: LocalServer, namespace: str) -> None:
    queue = AsyncFairQueue(server.url, namespace)
    callers = [asyncio.create_task(queue.push(Task(user_id="f", payload=i))) for i in range(10)]
    await asyncio.sleep(0)  # queued, not yet sent
    await queue.close()
    assert all(caller.done() for caller in callers)
    ids = [caller.result() for caller in callers]
    async with AsyncFairQueue(server.url, namespace) as reader:
        assert all([await reader.get(task_id) is not None for task_id in ids])


async def test_a_push_with_replicas_goes_alone(aqueue: AsyncFairQueue) -> None:
    with pytest.raises(InvalidInput, match="replicas"):
        await aqueue.push(Task(user_id="g"), replicas=-1)
    assert await aqueue.push(Task(user_id="g", task_id="r"), replicas=0) == "r"
