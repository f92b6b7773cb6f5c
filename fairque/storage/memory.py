"""The in-memory storage: pure Python, for tests and development.

The one place the semantics are written a second time (design section 2); the
conformance tests run the same cases against it and the Redis storage. Give it a
:class:`ManualClock` to move time by hand.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from fairque.storage.models import (
    PutTaskRequest,
    QueueStat,
    RetryInfo,
    Stats,
    StorageTask,
)
from fairque.storage.plan import WorkerReport
from fairque.storage.requests import Requests

Clock = Callable[[], float]  # seconds since the epoch


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class _Record:
    queue_num: int
    data: bytes
    created_at: float
    start_time: float
    prev_start_time: float | None = None
    attempts: int = 0
    deadline: float | None = None  # set while taken
    turn: int = 0  # the heap entry that is current (older entries are stale)


def _time(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)


class MemoryStorage:
    """Blocking :class:`~fairque.storage.Storage` in this process; safe across threads."""

    def __init__(self, clock: Clock = time.time, visibility_timeout: float | None = None) -> None:
        self.clock = clock
        self.requests = Requests(visibility_timeout)
        self._lock = threading.Lock()
        self._tasks: dict[int, _Record] = {}
        self._queues: dict[int, list[tuple[float, int, int]]] = {}  # (start, turn, id)
        self._leases: list[tuple[float, int, int]] = []  # (deadline, turn, id)
        self._ids = itertools.count(1)
        self._turns = itertools.count(1)
        self._workers: dict[str, tuple[float, WorkerReport]] = {}  # id: (expires, report)
        self._plan: dict[str, list[int]] = {}

    def _enqueue(self, task_id: int, record: _Record) -> None:
        record.deadline = None
        record.turn = next(self._turns)
        heap = self._queues.setdefault(record.queue_num, [])
        heapq.heappush(heap, (record.start_time, record.turn, task_id))

    def _reap(self, now: float) -> None:
        """Expired leases go back to their queue, now, with attempts + 1."""
        while self._leases and self._leases[0][0] <= now:
            _, turn, task_id = heapq.heappop(self._leases)
            record = self._tasks.get(task_id)
            if record is not None and record.turn == turn and record.deadline is not None:
                record.attempts += 1
                record.prev_start_time, record.start_time = record.start_time, now
                self._enqueue(task_id, record)

    def get_task(
        self, queue_num: int, count: int, visibility_timeout: float | None = None
    ) -> list[StorageTask]:
        take = self.requests.take(queue_num, count, visibility_timeout)
        with self._lock:
            now = self.clock()
            self._reap(now)
            heap = self._queues.get(take.queue_num, [])
            taken: list[StorageTask] = []
            while heap and len(taken) < take.count and heap[0][0] <= now:
                _, turn, task_id = heapq.heappop(heap)
                record = self._tasks.get(task_id)
                if record is None or record.turn != turn:
                    continue  # done, or queued again since
                record.deadline = now + take.visibility
                heapq.heappush(self._leases, (record.deadline, record.turn, task_id))
                taken.append(self._view(task_id, record))
            return taken

    def _view(self, task_id: int, record: _Record) -> StorageTask:
        previous = record.prev_start_time
        return StorageTask(
            task_id,
            record.queue_num,
            record.data,
            record.attempts,
            _time(record.created_at),
            _time(record.start_time),
            None if previous is None else _time(previous),
        )

    def done_task(self, task_ids: Sequence[int]) -> int:
        ids = self.requests.done(task_ids)
        with self._lock:
            return sum(self._tasks.pop(task_id, None) is not None for task_id in ids)

    def retry_task(self, retries: Sequence[RetryInfo]) -> int:
        checked = self.requests.retries(retries)
        with self._lock:
            self._reap(self.clock())
            returned = 0
            for task_id, next_start in checked:
                record = self._tasks.get(task_id)
                if record is None or record.deadline is None:
                    continue
                record.attempts += 1
                record.prev_start_time, record.start_time = (
                    record.start_time,
                    next_start.timestamp(),
                )
                self._enqueue(task_id, record)
                returned += 1
            return returned

    def put_tasks(self, requests: Sequence[PutTaskRequest]) -> list[int]:
        puts = self.requests.puts(requests)
        with self._lock:
            now = self.clock()
            ids = []
            for put in puts:
                if put.start_time is not None:
                    start = put.start_time.timestamp()
                else:
                    start = now + (0.0 if put.delay is None else put.delay.total_seconds())
                task_id = next(self._ids)
                record = _Record(put.queue_num, put.data, now, start)
                self._tasks[task_id] = record
                self._enqueue(task_id, record)
                ids.append(task_id)
            return ids

    def put_task(self, request: PutTaskRequest) -> int:
        return self.put_tasks([request])[0]

    def get_stat(self) -> Stats:
        with self._lock:
            now = self.clock()
            self._reap(now)
            figures: dict[int, list[int]] = {}
            for record in self._tasks.values():
                counts = figures.setdefault(record.queue_num, [0, 0, 0, 0])
                counts[0] += 1
                if record.deadline is not None:
                    counts[2] += 1
                elif record.start_time <= now:
                    counts[1] += 1
                else:
                    counts[3] += 1
            return Stats({n: QueueStat(n, *figures[n]) for n in sorted(figures)})

    def _drop_expired(self) -> None:
        """Workers whose beat expired leave the registry and the plan."""
        now = self.clock()
        for worker in [w for w, (expires, _) in self._workers.items() if expires <= now]:
            del self._workers[worker]
            self._plan.pop(worker, None)

    def beat(self, report: WorkerReport, ttl: float) -> list[int] | None:
        beat = self.requests.beat(report, ttl)
        with self._lock:
            self._drop_expired()
            self._workers[report.worker_id] = (self.clock() + beat.ttl, beat.report)
            plan = self._plan.get(report.worker_id)
            return None if plan is None else list(plan)

    def workers(self) -> list[WorkerReport]:
        with self._lock:
            self._drop_expired()
            return [self._workers[worker][1] for worker in sorted(self._workers)]

    def publish_plan(self, plan: Mapping[str, Sequence[int]]) -> int:
        checked = self.requests.plan(plan)
        with self._lock:
            self._drop_expired()
            self._plan = {w: queues for w, queues in checked.items() if w in self._workers}
            return len(self._plan)

    def read_plan(self) -> dict[str, list[int]]:
        with self._lock:
            self._drop_expired()
            return {worker: list(queues) for worker, queues in self._plan.items()}


class AsyncMemoryStorage:
    """:class:`MemoryStorage` behind coroutines (:class:`~fairque.storage.AsyncStorage`);
    ``storage`` lets blocking and asyncio code share one."""

    def __init__(
        self,
        storage: MemoryStorage | None = None,
        *,
        clock: Clock = time.time,
        visibility_timeout: float | None = None,
    ) -> None:
        self.storage = storage or MemoryStorage(clock, visibility_timeout)

    async def get_task(
        self, queue_num: int, count: int, visibility_timeout: float | None = None
    ) -> list[StorageTask]:
        # Let other coroutines run, as a network round trip would: a processor that always
        # finds work must not keep the event loop (and stop()) from everyone else.
        await asyncio.sleep(0)
        return self.storage.get_task(queue_num, count, visibility_timeout)

    async def done_task(self, task_ids: Sequence[int]) -> int:
        return self.storage.done_task(task_ids)

    async def retry_task(self, retries: Sequence[RetryInfo]) -> int:
        return self.storage.retry_task(retries)

    async def put_task(self, request: PutTaskRequest) -> int:
        return self.storage.put_task(request)

    async def put_tasks(self, requests: Sequence[PutTaskRequest]) -> list[int]:
        return self.storage.put_tasks(requests)

    async def get_stat(self) -> Stats:
        return self.storage.get_stat()

    async def beat(self, report: WorkerReport, ttl: float) -> list[int] | None:
        return self.storage.beat(report, ttl)

    async def workers(self) -> list[WorkerReport]:
        return self.storage.workers()

    async def publish_plan(self, plan: Mapping[str, Sequence[int]]) -> int:
        return self.storage.publish_plan(plan)

    async def read_plan(self) -> dict[str, list[int]]:
        return self.storage.read_plan()
