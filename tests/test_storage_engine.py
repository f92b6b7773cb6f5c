"""What the Redis storage does beyond the conformance suite: it shares the fair queue's
key space, leases, maintenance and stats; the asyncio facades; a killed processor."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from fairque import FairQueue, InvalidInput, Job, JobQueue, RecordKind, Task, TaskState
from fairque.engine.calls import Call
from fairque.servers.embedded import LocalServer
from fairque.storage import (
    AsyncMemoryStorage,
    AsyncRedisStorage,
    AsyncStorage,
    ManualClock,
    PutTaskRequest,
    QueueStat,
    RedisStorage,
    RetryInfo,
)
from fairque.storage.models import MAX_COUNT
from tests.conftest import wait_for

pytestmark = pytest.mark.cluster


def fair(storage: RedisStorage) -> FairQueue:
    """The fair queue of the storage's namespace, on the same connection pool."""
    namespace = storage.ops.namespace
    return FairQueue(namespace=namespace.name, executor=storage.executor)


@pytest.fixture
def storage(server: LocalServer, namespace: str) -> Iterator[RedisStorage]:
    with RedisStorage(server.url, namespace) as storage:
        yield storage


def test_storage_tasks_show_in_the_fair_queue_stats(storage: RedisStorage) -> None:
    storage.put_tasks([PutTaskRequest(1, b"a"), PutTaskRequest(1, b"b")])
    storage.put_task(PutTaskRequest(2, b"c", delay=3600))
    [task] = storage.get_task(1, 1)
    storage.done_task([task.id])
    stats = fair(storage).stats()
    assert stats.states[TaskState.QUEUED] == 1
    assert stats.states[TaskState.SCHEDULED] == 1
    assert stats.states[TaskState.STARTED] == 0
    assert (stats.counters["pushed"], stats.counters["started"]) == (3, 1)
    assert stats.counters["finished"] == 1


def test_fair_queue_maintenance_returns_expired_storage_tasks(storage: RedisStorage) -> None:
    task_id = storage.put_task(PutTaskRequest(4, b"a"))
    storage.get_task(4, 1, visibility_timeout=0.05)
    assert fair(storage).stats().states[TaskState.STARTED] == 1
    wait_for(lambda: fair(storage).reap().expired == 1)
    # Back in its numbered queue, not in a tenant queue: a fair pop does not see it.
    assert fair(storage).pop() == []
    [task] = storage.get_task(4, 1)
    assert (task.id, task.attempts) == (task_id, 1)


def test_fair_and_storage_tasks_share_ids_without_clashing(storage: RedisStorage) -> None:
    fair(storage).push(Task(user_id="alice", task_id="1"))
    fair(storage).push(Task(user_id="alice", task_id="2"))
    assert storage.put_task(PutTaskRequest(1, b"a")) == 3
    assert storage.done_task([1, 2]) == 0  # fair tasks are not storage tasks
    info = fair(storage).get("1")
    assert info is not None
    assert info.state is TaskState.QUEUED
    assert storage.retry_task([RetryInfo.after(2, 1.0)]) == 0


def test_the_fair_queue_leaves_storage_tasks_alone(storage: RedisStorage) -> None:
    task_id = storage.put_task(PutTaskRequest(1, b"a"))
    assert fair(storage).cancel(str(task_id)) is False
    with pytest.raises(InvalidInput, match="storage queue 1"):
        fair(storage).get(str(task_id))
    [task] = storage.get_task(1, 1)
    assert task.id == task_id


def test_each_record_says_what_it_is(storage: RedisStorage) -> None:
    queue = fair(storage)
    jobs = JobQueue(queue)
    made = {
        queue.push(Task(user_id="alice")): RecordKind.TASK,
        jobs.push(Job(name="resize")): RecordKind.JOB,
        str(storage.put_task(PutTaskRequest(1, b"a"))): RecordKind.STORAGE,
    }
    for record_id, kind in made.items():
        record = queue.get_record(record_id)
        assert record is not None
        assert (record.kind, record.fields["kind"]) == (kind, kind.value.encode())
    task_id, job_id, storage_id = made
    with pytest.raises(InvalidInput, match=r"is a JQ master job: read it with JobQueue\.get"):
        queue.get(job_id)
    with pytest.raises(InvalidInput, match=r"is a fair-queue task: read it with FairQueue\.get"):
        jobs.get(task_id)
    with pytest.raises(InvalidInput, match="storage queue 1"):
        jobs.get(storage_id)


def test_scripts_refuse_a_queue_key_that_does_not_match(storage: RedisStorage) -> None:
    call = storage.ops.get_task(1, 1)
    wrong = Call(
        call.script,
        (*call.keys[:-1], storage.ops.namespace.key("storage:queue:2")),
        call.args,
        call.parse,
    )
    with pytest.raises(InvalidInput) as caught:
        storage.executor.execute(wrong)
    assert caught.value.field == "queue_num"
    put = storage.ops.put_task(PutTaskRequest(1, b"a"))
    wrong_put = Call(
        put.script,
        (*put.keys[:-1], storage.ops.namespace.key("storage:queue:2")),
        put.args,
        put.parse,
    )
    with pytest.raises(InvalidInput):
        storage.executor.execute(wrong_put)
    retry = storage.ops.retry_task([RetryInfo.after(1, 1.0)])
    bad_rows = Call(retry.script, retry.keys, (*retry.args[:-2], 2, retry.args[-1]), int)
    with pytest.raises(InvalidInput):
        storage.executor.execute(bad_rows)
    assert storage.get_stat().queues == {}


def test_a_killed_processor_loses_nothing(
    storage: RedisStorage, server: LocalServer, namespace: str
) -> None:
    """A real process takes a batch and dies (SIGKILL) before done or retry: after the
    visibility timeout every task comes back with attempts + 1."""
    ids = storage.put_tasks([PutTaskRequest(9, bytes([i])) for i in range(3)])
    processor = textwrap.dedent(f"""
        import sys, time
        from fairque.storage import RedisStorage
        storage = RedisStorage({server.url!r}, {namespace!r})
        taken = storage.get_task(9, 10, visibility_timeout=0.5)
        print(len(taken), flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", processor], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"3\n"
        assert storage.get_stat().of(9) == QueueStat(9, total=3, taken=3)
    finally:
        child.kill()
        child.wait()
    back = wait_for(lambda: storage.get_task(9, 10))
    assert sorted(task.id for task in back) == ids
    assert {task.attempts for task in back} == {1}


def test_the_largest_batches(storage: RedisStorage) -> None:
    ids = storage.put_tasks([PutTaskRequest(1, b"") for _ in range(MAX_COUNT)])
    taken = storage.get_task(1, MAX_COUNT)
    assert [task.id for task in taken] == ids
    assert storage.done_task(ids) == MAX_COUNT


async def _round_trip(storage: AsyncStorage) -> None:
    first = await storage.put_task(PutTaskRequest(1, b"a"))
    second, _ = await storage.put_tasks([PutTaskRequest(1, b"b"), PutTaskRequest(2, b"c")])
    taken = await storage.get_task(1, 5)
    assert [task.id for task in taken] == [first, second]
    assert await storage.retry_task([RetryInfo.after(second, 3600)]) == 1
    assert await storage.done_task([first]) == 1
    stats = await storage.get_stat()
    assert stats.queues == {1: QueueStat(1, 1, 0, 0, 1), 2: QueueStat(2, 1, 1, 0, 0)}


async def test_async_redis_storage(server: LocalServer, namespace: str) -> None:
    async with AsyncRedisStorage(server.url, namespace) as storage:
        await _round_trip(storage)


async def test_async_memory_storage() -> None:
    await _round_trip(AsyncMemoryStorage(clock=ManualClock()))
