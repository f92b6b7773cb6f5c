"""Sharded queues: one logical queue over N namespaces, on servers and clusters."""

from __future__ import annotations

import asyncio
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta

import pytest

from fairque import (
    AsyncShardedQueue,
    FairQueue,
    InvalidInput,
    Priority,
    Queue,
    QueueSettings,
    RecordKind,
    ShardedQueue,
    Task,
    TaskNotFound,
    TaskState,
)
from fairque.engine.shards import Rotation, shard_index, shard_namespaces
from fairque.queue.models import QueueStats, TenantStats
from fairque.queue.plans import merge_stats, soonest
from fairque.worker import Registry, Worker, WorkerConfig, task
from tests.conftest import Server, wait_for

pytestmark = pytest.mark.cluster

SHARDS = 3


def tenants_by_shard(per_shard: int) -> dict[int, list[str]]:
    """``per_shard`` tenant names for each of the SHARDS shards."""
    found: dict[int, list[str]] = {shard: [] for shard in range(SHARDS)}
    number = 0
    while any(len(names) < per_shard for names in found.values()):
        name = f"tenant-{number}"
        if len(found[shard_index(name, SHARDS)]) < per_shard:
            found[shard_index(name, SHARDS)].append(name)
        number += 1
    return found


def adds_up(step: Callable[[], int], total: int) -> None:
    """Calls ``step`` until what it returned adds up to ``total``."""
    done = [0]

    def probe() -> bool:
        done[0] += step()
        return done[0] >= total

    wait_for(probe)


@pytest.fixture
def sharded(server: Server, namespace: str) -> Iterator[ShardedQueue]:
    settings = QueueSettings(retry_backoff_base=0.01)
    queue = ShardedQueue(server.url, namespace, shards=SHARDS, settings=settings)
    yield queue
    queue.close()


@pytest.fixture
async def asharded(server: Server, namespace: str) -> AsyncIterator[AsyncShardedQueue]:
    queue = AsyncShardedQueue(server.url, namespace, shards=SHARDS)
    yield queue
    await queue.close()


def test_tenants_map_to_shards_by_crc32() -> None:
    assert shard_index("alice", 7) == zlib.crc32(b"alice") % 7 == 5  # any process agrees
    assert shard_namespaces("jobs", 3) == ["jobs:0", "jobs:1", "jobs:2"]
    spread = Counter(shard_index(f"user-{n}", 4) for n in range(4000))
    assert min(spread.values()) > 900  # ~1000 each


@pytest.mark.parametrize("shards", [0, 1025])
def test_bad_shard_counts_are_refused(shards: int) -> None:
    with pytest.raises(InvalidInput, match="shards"):
        ShardedQueue("redis://127.0.0.1:1", shards=shards)


def test_every_shard_is_asked_first_in_turn() -> None:
    rotation = Rotation(3)
    assert [rotation.next_order() for _ in range(4)] == [
        [0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 1, 2]
    ]  # fmt: skip


def test_stats_and_due_times_add_up() -> None:
    one = QueueStats({TaskState.QUEUED: 1}, {"pushed": 2}, {"a": TenantStats(queued=1)})
    two = QueueStats({TaskState.QUEUED: 3}, {"pushed": 4}, {"a": TenantStats(pushed=5)})
    merged = merge_stats([one, two], 20)
    assert (merged.states, merged.counters) == ({TaskState.QUEUED: 4}, {"pushed": 6})
    assert merged.tenants == {"a": TenantStats(queued=1, pushed=5)}
    assert soonest([None, 2.0, 1.0]) == 1.0
    assert soonest([None]) is None


def test_tasks_land_on_their_tenants_shard(sharded: ShardedQueue) -> None:
    names = tenants_by_shard(2)
    tasks = [Task(user_id=name, payload=name) for shard in names.values() for name in shard]
    ids = sharded.push_many(tasks[::-1])
    assert [sharded.get(task_id).user_id for task_id in ids] == [  # type: ignore[union-attr]
        task.user_id for task in tasks[::-1]
    ]
    for shard, tenants in names.items():
        assert set(sharded.shards[shard].stats().tenants) == set(tenants)
    assert sharded.stats().states[TaskState.QUEUED] == len(tasks)
    sharded.push(Task(user_id=names[1][0]))
    assert sharded.shards[1].stats().tenants[names[1][0]].queued == 2


def test_dependencies_stay_within_a_shard(sharded: ShardedQueue) -> None:
    names = tenants_by_shard(2)
    parent = Task(user_id=names[0][0], task_id="parent")
    same = Task(user_id=names[0][1], task_id="same", depends_on=("parent",))
    assert sharded.push_many([parent, same]) == ["parent", "same"]
    other = Task(user_id=names[1][0], task_id="other", depends_on=("parent",))
    with pytest.raises(InvalidInput) as caught:
        sharded.push(other)
    assert caught.value.field == "depends_on"
    assert sharded.get("other") is None


def test_a_busy_shard_does_not_starve_the_others(sharded: ShardedQueue) -> None:
    names = tenants_by_shard(1)
    sharded.push_many([Task(user_id=names[0][0], payload=n) for n in range(100)])
    sharded.push(Task(user_id=names[1][0]))
    sharded.push(Task(user_id=names[2][0]))
    served = [task.user_id for _ in range(3) for task in sharded.pop()]
    assert sorted(served) == sorted(names[n][0] for n in range(3))


def test_a_pop_fills_its_count_from_several_shards(sharded: ShardedQueue) -> None:
    names = tenants_by_shard(1)
    sharded.push_many([Task(user_id=names[n][0]) for n in range(3) for _ in range(4)])
    leased = sharded.pop(count=12)
    assert Counter(task.user_id for task in leased) == {names[n][0]: 4 for n in range(3)}
    assert sharded.pop() == []
    assert sharded.finish_many(leased[:6]) == []
    sharded.finish(leased[6])
    assert sharded.release(leased[7:9]) == []
    assert sharded.fail(leased[9], "boom", retry=False) == TaskState.FAILED
    assert sharded.extend(leased[10], 60) > 0
    stats = sharded.stats()
    assert (stats.counters["finished"], stats.counters["released"]) == (7, 2)
    assert stats.states[TaskState.FAILED] == 1


def test_a_sharded_pop_refuses_to_wait_on_one_shard(sharded: ShardedQueue) -> None:
    # A wait is one namespace's signal list: on one shard it would sleep through work
    # that comes to the others. Workers wait on every shard's wake channel instead.
    sharded.push(Task(user_id="alice"))
    with pytest.raises(InvalidInput, match="wait"):
        sharded.pop(wait=1.0)
    assert len(sharded.pop()) == 1


def test_calls_by_task_id_find_its_shard(sharded: ShardedQueue) -> None:
    names = tenants_by_shard(1)
    waiting = sharded.push(Task(user_id=names[2][0], priority=Priority.LOW))
    assert sharded.cancel(waiting)
    with pytest.raises(TaskNotFound):
        sharded.cancel("no-such-task")
    assert sharded.get("no-such-task") is None
    failing = sharded.push(Task(user_id=names[1][0], max_retries=0))
    [leased] = sharded.pop()
    sharded.fail(leased, "boom")
    assert sharded.retry(failing)
    sharded.xcom_push(failing, "answer", 42)
    assert sharded.xcom_pull(failing, "answer") == 42


def test_maintenance_covers_every_shard(sharded: ShardedQueue) -> None:
    names = tenants_by_shard(1)
    delay = timedelta(milliseconds=50)
    sharded.push_many([Task(user_id=names[shard][0], delay=delay) for shard in range(SHARDS)])
    due = sharded.next_due()  # 0 once the delay has passed, as on a busy machine
    assert due is not None
    assert 0 <= due <= 0.05
    adds_up(sharded.promote, SHARDS)
    assert len(sharded.pop(count=SHARDS, lease_seconds=0.05)) == SHARDS
    adds_up(lambda: sharded.reap().expired, SHARDS)
    assert sharded.stats().states[TaskState.QUEUED] == SHARDS


def test_lists_page_through_every_shard(sharded: ShardedQueue) -> None:
    names = tenants_by_shard(2)
    tenants = [name for shard in names.values() for name in shard]
    pushed = set(sharded.push_many([Task(user_id=tenants[n % 6]) for n in range(20)]))
    seen: list[str] = []
    cursor, pages = 0, 0
    while True:
        page = sharded.tasks(TaskState.QUEUED, cursor=cursor, limit=3)
        seen += [summary.task_id for summary in page.tasks]
        pages += 1
        cursor = page.cursor
        if not cursor:
            break
    assert sorted(seen) == sorted(pushed)  # each task once, from all three shards
    assert pages >= 7
    one = sharded.tasks("queued", user_id=names[1][0])  # a tenant's: its shard only
    assert {summary.user_id for summary in one.tasks} == {names[1][0]}


def test_a_page_fills_up_to_its_limit_across_shards(sharded: ShardedQueue) -> None:
    names = tenants_by_shard(1)
    pushed = sharded.push_many([Task(user_id=names[n % 3][0]) for n in range(20)])
    page = sharded.tasks(TaskState.QUEUED, limit=50)
    assert sorted(summary.task_id for summary in page.tasks) == sorted(pushed)
    assert page.cursor == 0
    sharded.set_tenant(names[0][0], weight=2)
    sharded.set_tenant(names[2][0], weight=3)
    shares = sharded.tenants_with_shares(count=10)
    assert {one.tenant for one in shares.tenants} == {names[0][0], names[2][0]}
    assert shares.cursor == 0
    busiest = sharded.busiest_tenants(count=10)
    assert set(busiest.tenants) == {names[n][0] for n in range(3)}
    # A full page ends where it is: the next one goes on from there.
    first = sharded.tasks(TaskState.QUEUED, limit=8)
    rest = sharded.tasks(TaskState.QUEUED, cursor=first.cursor, limit=50)
    assert len(first.tasks) == 8
    assert sorted(s.task_id for s in first.tasks + rest.tasks) == sorted(pushed)


def test_retry_failed_and_records_cover_every_shard(sharded: ShardedQueue) -> None:
    names = tenants_by_shard(1)
    failing = [sharded.push(Task(user_id=names[shard][0], max_retries=0)) for shard in range(3)]
    for leased in sharded.pop(count=3):
        sharded.fail(leased, "boom")
    assert [sharded.retry_failed(names[shard][0]) for shard in range(3)] == [1, 1, 1]
    record = sharded.get_record(failing[2])
    assert record is not None
    assert (record.kind, record.state) == (RecordKind.TASK, TaskState.QUEUED)
    assert sharded.get_record("nothing") is None
    assert not hasattr(sharded, "execute")  # a call for one namespace has no place here


def test_both_queues_satisfy_the_queue_protocol(sharded: ShardedQueue, queue: FairQueue) -> None:
    def served(queue: Queue) -> int:
        return queue.stats().states[TaskState.QUEUED]

    assert served(sharded) == served(queue) == 0


async def test_the_async_sharded_queue(asharded: AsyncShardedQueue) -> None:
    names = tenants_by_shard(1)
    ids = await asharded.push_many([Task(user_id=names[n][0]) for n in range(SHARDS)])
    assert await asharded.push(Task(user_id=names[0][0], max_retries=0), replicas=0)
    assert [(await asharded.get(task_id)).user_id for task_id in ids] == [  # type: ignore[union-attr]
        names[n][0] for n in range(SHARDS)
    ]
    assert await asharded.get("nothing") is None
    assert await asharded.get_record("nothing") is None
    page = await asharded.tasks(TaskState.QUEUED, limit=1)
    assert len(page.tasks) == 1
    assert page.cursor
    leased = await asharded.pop(count=4)
    assert len(leased) == 4
    by_tenant = {task.user_id: task for task in leased if task.task_id in ids}
    await asharded.finish(by_tenant[names[0][0]])
    assert await asharded.finish_many([by_tenant[names[1][0]]]) == []
    assert await asharded.release([by_tenant[names[2][0]]]) == []
    [last] = [task for task in leased if task.task_id not in ids]
    assert await asharded.extend(last, 60) > 0
    assert await asharded.fail(last, "boom") == TaskState.FAILED
    assert await asharded.retry(last.task_id)
    assert await asharded.cancel(last.task_id)
    await asharded.xcom_push(ids[1], "k", "v")
    assert await asharded.xcom_pull(ids[1], "k") == "v"
    assert (await asharded.reap()).expired == 0
    assert await asharded.promote() == 0
    assert await asharded.next_due() is None  # nothing leased or scheduled
    await asharded.push(Task(user_id=names[2][0], delay=timedelta(hours=1)))
    assert 3500 < (await asharded.next_due() or 0) <= 3600
    stats = await asharded.stats()
    assert (stats.counters["finished"], stats.states[TaskState.CANCELED]) == (2, 1)
    assert await asharded.retry_failed(names[0][0]) == 0


sharded_functions = Registry()
ran: list[str] = []


@task(into=sharded_functions, name="note")
async def note(tenant: str) -> None:
    ran.append(tenant)


async def test_a_worker_serves_every_shard(
    asharded: AsyncShardedQueue, server: Server, namespace: str
) -> None:
    ran.clear()
    names = tenants_by_shard(2)
    tenants = [name for shard in names.values() for name in shard]
    await asharded.push_many([note.build(user_id=name, args=[name]) for name in tenants])
    config = WorkerConfig(redis_url=server.url, namespace=namespace, shards=SHARDS,
                          poll_interval_seconds=0.05)  # fmt: skip
    worker = Worker(config, sharded_functions)
    running = asyncio.create_task(worker.run_async())
    deadline = asyncio.get_running_loop().time() + 10
    while (await asharded.stats()).counters.get("finished", 0) < len(tenants):
        assert asyncio.get_running_loop().time() < deadline, "the worker did not drain"
        await asyncio.sleep(0.01)
    # Pushed while the worker idles: the wake channel of any shard wakes it.
    await asharded.push(note.build(user_id=names[2][1], args=["late"]))
    while "late" not in ran:
        assert asyncio.get_running_loop().time() < deadline + 10, "no wake-up"
        await asyncio.sleep(0.01)
    worker.stop()
    await running
    assert sorted(ran) == sorted([*tenants, "late"])
