"""The Storage of seed 004: one conformance suite for the in-memory storage, the Redis
storage on every engine and the Tarantool storage, the Manager's board included."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, TypeVar

import pytest

from fairque.errors import InvalidInput
from fairque.servers.embedded import LocalServer
from fairque.servers.local_tarantool import LocalTarantool
from fairque.storage import (
    ManualClock,
    MemoryStorage,
    PutTaskRequest,
    QueueReport,
    QueueStat,
    RedisStorage,
    RetryInfo,
    Storage,
    TarantoolStorage,
    WorkerReport,
)
from tests.conftest import wait_for

pytestmark = pytest.mark.cluster

T = TypeVar("T")
VISIBILITY = 0.3  # seconds: short, so the Redis cases see leases expire quickly


@dataclass
class Backend:
    storage: Storage
    clock: ManualClock | None  # None: the server's own clock

    def now(self) -> datetime:
        seconds = self.clock() if self.clock else datetime.now(timezone.utc).timestamp()
        return datetime.fromtimestamp(seconds, timezone.utc)

    def later(self, probe: Callable[[], T]) -> T:
        """Polls ``probe`` while time passes (a manual clock moves 50 ms per poll)."""

        def step() -> T:
            if self.clock:
                self.clock.advance(0.05)
            return probe()

        return wait_for(step)


@pytest.fixture
def memory_backend() -> Backend:
    clock = ManualClock()
    return Backend(MemoryStorage(clock, visibility_timeout=VISIBILITY), clock)


@pytest.fixture
def redis_backend(server: LocalServer, namespace: str) -> Iterator[Backend]:
    storage = RedisStorage(server.url, namespace, visibility_timeout=VISIBILITY)
    yield Backend(storage, None)
    storage.close()


@pytest.fixture
def tarantool_backend(tarantool_server: LocalTarantool, namespace: str) -> Iterator[Backend]:
    storage = TarantoolStorage(tarantool_server.url, namespace, visibility_timeout=VISIBILITY)
    yield Backend(storage, None)
    storage.close()


def put(backend: Backend, queue_num: int = 1, data: bytes = b"x", **when: Any) -> int:
    return backend.storage.put_task(PutTaskRequest(queue_num, data, **when))


class StorageContract:
    """Every case, for each storage (the subclasses give ``backend``)."""

    def test_put_then_get_gives_the_task_once(self, backend: Backend) -> None:
        storage = backend.storage
        task_id = put(backend, 3, b"\x00payload\xff")
        [task] = storage.get_task(3, 10)
        assert (task.id, task.queue_num, task.data) == (task_id, 3, b"\x00payload\xff")
        assert task.attempts == 0
        assert task.prev_start_time is None
        assert abs((task.start_time - task.created_at).total_seconds()) < 0.01
        assert storage.get_task(3, 10) == []  # taken: invisible until its visibility timeout

    def test_get_takes_up_to_count_oldest_start_first_from_its_queue_only(
        self, backend: Backend
    ) -> None:
        storage = backend.storage
        ids = [put(backend, 1, bytes([i])) for i in range(5)]
        early = put(backend, 1, start_time=backend.now() - timedelta(minutes=5))
        other = put(backend, 2)
        assert [t.id for t in storage.get_task(1, 3)] == [early, ids[0], ids[1]]
        assert [t.id for t in storage.get_task(1, 10)] == ids[2:]
        assert [t.id for t in storage.get_task(2, 10)] == [other]
        assert storage.get_task(7, 10) == []

    def test_done_removes_tasks_and_ignores_unknown_ids(self, backend: Backend) -> None:
        storage = backend.storage
        taken, queued = put(backend), put(backend)
        storage.get_task(1, 1)
        assert storage.done_task([taken, queued, 999_999, taken]) == 2
        assert storage.done_task([taken]) == 0
        assert storage.done_task([]) == 0
        assert storage.get_stat().queues == {}
        assert storage.get_task(1, 10) == []

    def test_attempts_table_put_get_retry_get(self, backend: Backend) -> None:
        """Seed 004's table: PutTask 0 / zero; first GetTask 0 / zero; RetryTask +1 / the
        previous start; second GetTask 1 / the first activation."""
        storage = backend.storage
        task_id = put(backend)
        [first] = storage.get_task(1, 1)
        assert (first.attempts, first.prev_start_time) == (0, None)
        next_start = backend.now() + timedelta(seconds=0.5)
        assert storage.retry_task([RetryInfo(task_id, next_start)]) == 1
        assert storage.get_stat().of(1) == QueueStat(1, total=1, delayed=1)
        assert storage.get_task(1, 1) == []  # not before its next start time
        [second] = backend.later(lambda: storage.get_task(1, 1))
        assert second.id == task_id
        assert second.attempts == 1
        assert second.prev_start_time == first.start_time
        assert abs((second.start_time - next_start).total_seconds()) < 0.001

    def test_attempts_table_visibility_timeout(self, backend: Backend) -> None:
        """Seed 004's table: a handler that never answers; the task comes back by itself
        with attempts + 1, prev_start_time = the start it was taken at, available now."""
        storage = backend.storage
        task_id = put(backend)
        [first] = storage.get_task(1, 1)
        [again] = backend.later(lambda: storage.get_task(1, 1))
        assert again.id == task_id
        assert again.attempts == 1
        assert again.prev_start_time == first.start_time
        assert again.start_time >= first.start_time + timedelta(seconds=VISIBILITY)
        [third] = backend.later(lambda: storage.get_task(1, 1))
        assert (third.attempts, third.prev_start_time) == (2, again.start_time)

    def test_expired_task_counts_as_ready_and_retry_leaves_it(self, backend: Backend) -> None:
        storage = backend.storage
        task_id = put(backend)
        storage.get_task(1, 1, visibility_timeout=0.1)
        backend.later(lambda: storage.get_stat().of(1).ready == 1)
        # Its visibility timeout is over: a late retry no longer holds it.
        assert storage.retry_task([RetryInfo(task_id, backend.now() + timedelta(hours=1))]) == 0
        [task] = storage.get_task(1, 1)
        assert task.attempts == 1

    def test_retry_has_no_limit(self, backend: Backend) -> None:
        storage = backend.storage
        task_id = put(backend)
        for _ in range(25):
            [task] = storage.get_task(1, 1)
            storage.retry_task([RetryInfo(task_id, backend.now() - timedelta(seconds=1))])
        [task] = storage.get_task(1, 1)
        assert task.attempts == 25

    def test_retry_of_a_task_not_taken_changes_nothing(self, backend: Backend) -> None:
        storage = backend.storage
        task_id = put(backend)
        later = backend.now() + timedelta(hours=1)
        assert storage.retry_task([RetryInfo(task_id, later), RetryInfo(424_242, later)]) == 0
        [task] = storage.get_task(1, 1)
        assert task.attempts == 0

    def test_delayed_tasks_wait_for_their_start(self, backend: Backend) -> None:
        storage = backend.storage
        delayed = put(backend, delay=0.4)
        put(backend, start_time=backend.now() + timedelta(hours=2))
        put(backend, delay=timedelta(hours=1))
        assert storage.get_stat().of(1) == QueueStat(1, total=3, delayed=3)
        assert storage.get_task(1, 10) == []
        [task] = backend.later(lambda: storage.get_task(1, 10))
        assert task.id == delayed

    def test_stat_counts_each_queue(self, backend: Backend) -> None:
        storage = backend.storage
        for _ in range(4):
            put(backend, 5)
        put(backend, 5, delay=3600)
        put(backend, 6)
        storage.get_task(5, 3)
        stats = storage.get_stat()
        assert stats.queues == {
            5: QueueStat(5, total=5, ready=1, taken=3, delayed=1),
            6: QueueStat(6, total=1, ready=1),
        }
        assert stats.of(9) == QueueStat(9)

    def test_put_tasks_is_all_or_none(self, backend: Backend) -> None:
        storage = backend.storage
        ids = storage.put_tasks([PutTaskRequest(1, b"a"), PutTaskRequest(2, b"b", delay=60)])
        assert len(set(ids)) == 2
        with pytest.raises(InvalidInput) as caught:
            storage.put_tasks([PutTaskRequest(1, b"c"), PutTaskRequest(-1, b"d")])
        assert caught.value.field == "queue_num"
        assert storage.get_stat().of(1).total == 1

    @pytest.mark.parametrize(
        ("call", "field"),
        [
            (lambda s: s.get_task(-1, 1), "queue_num"),
            (lambda s: s.get_task(True, 1), "queue_num"),
            (lambda s: s.get_task(1, 0), "count"),
            (lambda s: s.get_task(1, 10_001), "count"),
            (lambda s: s.get_task(1, 1, visibility_timeout=0), "visibility_timeout"),
            (lambda s: s.get_task(1, 1, visibility_timeout="60"), "visibility_timeout"),
            (lambda s: s.done_task("123"), "task_ids"),
            (lambda s: s.done_task([1, "2"]), "task_ids"),
            (lambda s: s.done_task([0]), "task_ids"),
            (lambda s: s.retry_task([(1, datetime.now(timezone.utc))]), "retries"),
            (lambda s: s.retry_task(RetryInfo(1, datetime.now(timezone.utc))), "retries"),
            (lambda s: s.retry_task([RetryInfo(1, datetime(2030, 1, 1))]), "next_start_time"),
            (lambda s: s.retry_task([RetryInfo(1, "soon")]), "next_start_time"),  # type: ignore[arg-type]
            (lambda s: s.put_task(PutTaskRequest(1, "text")), "data"),  # type: ignore[arg-type]
            (lambda s: s.put_task(PutTaskRequest(1, b"x", delay=-1)), "delay"),
            (lambda s: s.put_task(PutTaskRequest(1, b"x", delay="1")), "delay"),  # type: ignore[arg-type]
            (
                lambda s: s.put_task(
                    PutTaskRequest(1, b"x", start_time=datetime.now(timezone.utc), delay=1)
                ),
                "delay",
            ),
            (
                lambda s: s.put_task(PutTaskRequest(1, b"x", start_time=datetime.now())),
                "start_time",
            ),
            (lambda s: s.put_task(b"x"), "request"),
            (lambda s: s.put_tasks([]), "requests"),
            (lambda s: s.put_tasks(PutTaskRequest(1, b"x")), "requests"),
            (lambda s: s.beat(WorkerReport("w", 1, {}), 0), "ttl"),
            (lambda s: s.beat(WorkerReport("w", 1, {}), "10"), "ttl"),
            (lambda s: s.beat(WorkerReport("", 1, {}), 10), "worker_id"),
            (lambda s: s.beat(WorkerReport("w", 1, {-1: QueueReport(1)}), 10), "queue_num"),
            (lambda s: s.beat("w", 10), "report"),
            (lambda s: s.publish_plan({"w": [-1]}), "queue_num"),
            (lambda s: s.publish_plan({"w": "1"}), "plan"),
            (lambda s: s.publish_plan({"w": [1] * 1025}), "plan"),
            (lambda s: s.publish_plan([("w", [1])]), "plan"),
        ],
    )
    def test_bad_input_is_refused_and_changes_nothing(
        self, backend: Backend, call: Callable[[Any], Any], field: str
    ) -> None:
        task_id = put(backend)
        with pytest.raises(InvalidInput) as caught:
            call(backend.storage)
        assert caught.value.field == field
        [task] = backend.storage.get_task(1, 10)
        assert (task.id, task.attempts) == (task_id, 0)

    def test_workers_beat_and_take_their_part_of_the_plan(self, backend: Backend) -> None:
        storage = backend.storage
        a = WorkerReport("a", 2, {1: QueueReport(10)}, host="h", pid=7)
        b = WorkerReport("b", 1, {1: QueueReport(5, 40, 0.5), 2: QueueReport(5)})
        assert storage.beat(a, 3600) is None  # no plan yet: no instruction
        assert storage.beat(b, VISIBILITY) is None
        assert storage.workers() == [a, b]
        assert storage.publish_plan({"a": [1, 1], "b": [2], "gone": [1]}) == 2
        assert storage.read_plan() == {"a": [1, 1], "b": [2]}
        assert storage.beat(a, 3600) == [1, 1]
        # b stops beating: once its ttl is over it leaves the registry and the plan.
        backend.later(lambda: [report.worker_id for report in storage.workers()] == ["a"])
        assert storage.read_plan() == {"a": [1, 1]}
        assert storage.beat(b, 3600) is None  # back, without a plan until the next one
        assert storage.publish_plan({}) == 0
        assert storage.beat(a, 3600) is None
        assert storage.read_plan() == {}


class TestMemoryStorage(StorageContract):
    @pytest.fixture
    def backend(self, memory_backend: Backend) -> Backend:
        return memory_backend


class TestRedisStorage(StorageContract):
    @pytest.fixture
    def backend(self, redis_backend: Backend) -> Backend:
        return redis_backend


class TestTarantoolStorage(StorageContract):
    @pytest.fixture
    def backend(self, tarantool_backend: Backend) -> Backend:
        return tarantool_backend
