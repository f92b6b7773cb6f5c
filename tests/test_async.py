"""The asyncio client runs the same ops as the sync one."""

from __future__ import annotations

import asyncio
import functools
import operator

import pytest

from fairque import AsyncFairQueue, LeaseLost, Priority, Task, TaskNotFound, TaskState
from fairque.servers.embedded import LocalServer
from tests.conftest import SCAN_COUNT

pytestmark = pytest.mark.cluster


async def test_async_round_trip(aqueue: AsyncFairQueue) -> None:
    first = await aqueue.push(Task(user_id="a", payload=1, keep_result=True))
    ids = await aqueue.push_many([Task(user_id="b", payload=2), Task(user_id="a", payload=3)])
    critical = await aqueue.push(Task(user_id="c", priority=Priority.CRITICAL, payload=4))
    leased = await aqueue.pop(count=10, worker_id="async")
    assert [task.user_id for task in leased] == ["a", "b", "c", "a"]
    await aqueue.finish(leased[0], result="one")
    assert await aqueue.finish_many(leased[1:2]) == []
    assert await aqueue.extend(leased[2], 30) == leased[2].lease_deadline
    assert await aqueue.fail(leased[2], "boom", retry=False) is TaskState.FAILED
    assert await aqueue.fail(leased[3], "again") is TaskState.SCHEDULED
    info = await aqueue.get(first)
    assert info is not None
    assert (info.state, info.result) == (TaskState.FINISHED, "one")
    with pytest.raises(LeaseLost):
        await aqueue.finish(leased[0])
    assert await aqueue.cancel(ids[1]) is True
    assert await aqueue.cancel(critical) is False
    with pytest.raises(TaskNotFound):
        await aqueue.cancel("missing")
    stats = await aqueue.stats()
    assert stats.counters["pushed"] == 4
    assert (await aqueue.reap()).expired == 0
    assert await aqueue.promote() == 0
    await aqueue.push(Task(user_id="d", payload=5))
    assert await aqueue.retry(ids[0]) is False  # finished, not failed
    held = await aqueue.pop(assigned_users=["d"])
    assert await aqueue.release(held) == []
    assert [task.payload for task in await aqueue.pop(assigned_users=["d"])] == [5]


async def test_async_pops_concurrently_deliver_once(aqueue: AsyncFairQueue) -> None:
    await aqueue.push_many([Task(user_id=f"u{i % 5}", payload=i) for i in range(300)])

    async def drain() -> list[int]:
        got: list[int] = []
        while tasks := await aqueue.pop(count=7):
            await aqueue.finish_many(tasks)
            got += [task.payload for task in tasks]
        return got

    results = await asyncio.gather(*(drain() for _ in range(4)))
    assert sorted(functools.reduce(operator.iadd, results, [])) == list(range(300))


async def test_async_context_manager_and_function_reload(server: LocalServer) -> None:
    async with AsyncFairQueue(server.url, "async-ctx") as queue:
        await queue.redis.function_flush()
        await queue.push(Task(user_id="u", payload="x", task_id="ctx-1"))
        assert [task.task_id for task in await queue.pop()] == ["ctx-1"]
        await queue.redis.delete(
            *[key async for key in queue.redis.scan_iter("fq:{async-ctx}:*", count=SCAN_COUNT)]
        )
