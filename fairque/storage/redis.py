"""The storage of seed 004 on the fairque engine: numbered queues in a namespace.

Both facades only send :class:`~fairque.storage.ops.StorageOps` calls through a
:class:`~fairque.FairQueue` / :class:`~fairque.AsyncFairQueue` of the same namespace, so
storage tasks share its key space, leases, maintenance and stats.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType

from fairque.client import AsyncFairQueue, FairQueue
from fairque.config import QueueSettings
from fairque.storage.models import PutTaskRequest, RetryInfo, Stats, StorageTask
from fairque.storage.ops import StorageOps
from fairque.storage.plan import WorkerReport


class RedisStorage:
    """Blocking :class:`~fairque.storage.Storage` on Redis / Valkey.

    >>> storage = RedisStorage(namespace="jobs")  # embedded Valkey  # doctest: +SKIP
    >>> storage.put_task(PutTaskRequest(1, b"payload"))  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str | None = None,
        namespace: str = "default",
        *,
        visibility_timeout: float | None = None,
        settings: QueueSettings | None = None,
        queue: FairQueue | None = None,
    ) -> None:
        self.queue = queue or FairQueue(url, namespace, settings=settings)
        self.ops = StorageOps(self.queue.ops, visibility_timeout)

    def get_task(
        self, queue_num: int, count: int, visibility_timeout: float | None = None
    ) -> list[StorageTask]:
        return self.queue.execute(self.ops.get_task(queue_num, count, visibility_timeout))

    def done_task(self, task_ids: Sequence[int]) -> int:
        return self.queue.execute(self.ops.done_task(task_ids))

    def retry_task(self, retries: Sequence[RetryInfo]) -> int:
        return self.queue.execute(self.ops.retry_task(retries))

    def put_task(self, request: PutTaskRequest) -> int:
        return self.queue.execute(self.ops.put_task(request))

    def put_tasks(self, requests: Sequence[PutTaskRequest]) -> list[int]:
        return self.queue.execute(self.ops.put_tasks(requests))

    def get_stat(self) -> Stats:
        return self.queue.execute(self.ops.get_stat())

    def beat(self, report: WorkerReport, ttl: float) -> list[int] | None:
        return self.queue.execute(self.ops.beat(report, ttl))

    def workers(self) -> list[WorkerReport]:
        return self.queue.execute(self.ops.workers())

    def publish_plan(self, plan: Mapping[str, Sequence[int]]) -> int:
        return self.queue.execute(self.ops.publish_plan(plan))

    def read_plan(self) -> dict[str, list[int]]:
        return self.queue.execute(self.ops.read_plan())

    def close(self) -> None:
        self.queue.close()

    def __enter__(self) -> RedisStorage:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncRedisStorage:
    """:class:`RedisStorage` for asyncio (:class:`~fairque.storage.AsyncStorage`)."""

    def __init__(
        self,
        url: str | None = None,
        namespace: str = "default",
        *,
        visibility_timeout: float | None = None,
        settings: QueueSettings | None = None,
        queue: AsyncFairQueue | None = None,
    ) -> None:
        self.queue = queue or AsyncFairQueue(url, namespace, settings=settings)
        self.ops = StorageOps(self.queue.ops, visibility_timeout)

    async def get_task(
        self, queue_num: int, count: int, visibility_timeout: float | None = None
    ) -> list[StorageTask]:
        return await self.queue.execute(self.ops.get_task(queue_num, count, visibility_timeout))

    async def done_task(self, task_ids: Sequence[int]) -> int:
        return await self.queue.execute(self.ops.done_task(task_ids))

    async def retry_task(self, retries: Sequence[RetryInfo]) -> int:
        return await self.queue.execute(self.ops.retry_task(retries))

    async def put_task(self, request: PutTaskRequest) -> int:
        return await self.queue.execute(self.ops.put_task(request))

    async def put_tasks(self, requests: Sequence[PutTaskRequest]) -> list[int]:
        return await self.queue.execute(self.ops.put_tasks(requests))

    async def get_stat(self) -> Stats:
        return await self.queue.execute(self.ops.get_stat())

    async def beat(self, report: WorkerReport, ttl: float) -> list[int] | None:
        return await self.queue.execute(self.ops.beat(report, ttl))

    async def workers(self) -> list[WorkerReport]:
        return await self.queue.execute(self.ops.workers())

    async def publish_plan(self, plan: Mapping[str, Sequence[int]]) -> int:
        return await self.queue.execute(self.ops.publish_plan(plan))

    async def read_plan(self) -> dict[str, list[int]]:
        return await self.queue.execute(self.ops.read_plan())

    async def close(self) -> None:
        await self.queue.close()

    async def __aenter__(self) -> AsyncRedisStorage:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
