"""The in-memory storage is a model of the Redis and Tarantool ones: random sequences of
operations give the same answers on each (hypothesis). Times are chosen so that nothing
ties or expires during a run, so the answers do not depend on either clock."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from fairque.servers.embedded import LocalServer
from fairque.servers.local_tarantool import LocalTarantool
from fairque.storage import (
    MemoryStorage,
    PutTaskRequest,
    RedisStorage,
    RetryInfo,
    Storage,
    TarantoolStorage,
)

HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class Put:
    queue_num: int
    delayed: bool


@dataclass(frozen=True)
class Get:
    queue_num: int
    count: int


@dataclass(frozen=True)
class Done:
    task_ids: tuple[int, ...]


@dataclass(frozen=True)
class Retry:
    task_id: int
    past: bool  # due at once (in the past, a distinct time per step) or in an hour


@dataclass(frozen=True)
class Stat:
    pass


queues = st.integers(0, 2)
ids = st.integers(1, 12)  # the first ids a run hands out, and some it never does
operations = st.one_of(
    st.builds(Put, queues, st.booleans()),
    st.builds(Get, queues, st.integers(1, 3)),
    st.builds(Done, st.lists(ids, max_size=3).map(tuple)),
    st.builds(Retry, ids, st.booleans()),
    st.builds(Stat),
)


def apply(storage: Storage, operation: object, step: int, base: datetime) -> Any:
    if isinstance(operation, Put):
        delay = HOUR if operation.delayed else None
        return storage.put_task(PutTaskRequest(operation.queue_num, b"%d" % step, delay=delay))
    if isinstance(operation, Get):
        taken = storage.get_task(operation.queue_num, operation.count, visibility_timeout=3600)
        return [(t.id, t.data, t.attempts, t.prev_start_time is None) for t in taken]
    if isinstance(operation, Done):
        return storage.done_task(operation.task_ids)
    if isinstance(operation, Retry):
        when = base - HOUR + timedelta(seconds=step) if operation.past else base + HOUR
        return storage.retry_task([RetryInfo(operation.task_id, when)])
    return storage.get_stat()


@settings(max_examples=60, deadline=None)
@given(st.lists(operations, max_size=25))
def test_memory_and_redis_agree(server: LocalServer, steps: list[object]) -> None:
    base = datetime.now(timezone.utc)
    memory = MemoryStorage()
    with RedisStorage(server.url, f"t-{uuid.uuid4().hex[:12]}") as redis_storage:
        for step, operation in enumerate(steps):
            expected = apply(memory, operation, step, base)
            assert apply(redis_storage, operation, step, base) == expected, (step, operation)


@settings(max_examples=60, deadline=None)
@given(st.lists(operations, max_size=25))
def test_memory_and_tarantool_agree(tarantool_server: LocalTarantool, steps: list[object]) -> None:
    base = datetime.now(timezone.utc)
    memory = MemoryStorage()
    namespace = f"t-{uuid.uuid4().hex[:12]}"
    with TarantoolStorage(tarantool_server.url, namespace) as tarantool_storage:
        for step, operation in enumerate(steps):
            expected = apply(memory, operation, step, base)
            assert apply(tarantool_storage, operation, step, base) == expected, (step, operation)
