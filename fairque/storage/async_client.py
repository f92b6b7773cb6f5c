"""The storage on the fairque engine: numbered queues in a namespace.

The facade sends :class:`~fairque.storage.ops.StorageOps` calls through an executor;
storage tasks share their namespace's key space, leases, maintenance and stats with the
fair queue. The asyncio facade is written by hand in :mod:`fairque.storage.async_client`;
the blocking one, in :mod:`fairque.storage.client`, is generated from it
(``tools/unasync.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fairque.config import QueueSettings
from fairque.engine import settings as settings_store
from fairque.engine.async_executor import AsyncClosing, AsyncExecutor
from fairque.engine.keys import Namespace
from fairque.storage.models import PutTaskRequest, RetryInfo, Stats, StorageTask
from fairque.storage.ops import StorageOps
from fairque.storage.plan import WorkerReport


class AsyncRedisStorage(AsyncClosing):
    """:class:`~fairque.storage.AsyncStorage` on Redis / Valkey.

    >>> storage = AsyncRedisStorage(namespace="jobs")  # embedded Valkey  # doctest: +SKIP
    >>> await storage.put_task(PutTaskRequest(1, b"payload"))  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str | None = None,
        namespace: str = "default",
        *,
        visibility_timeout: float | None = None,
        settings: QueueSettings | None = None,
        executor: AsyncExecutor | None = None,
    ) -> None:
        self.ops = StorageOps(Namespace(namespace), visibility_timeout)
        self.owns_executor = executor is None
        self.executor = executor or AsyncExecutor.connect(url)
        settings_store.write_on_first_use(self.executor, self.ops.namespace, settings)

    async def get_task(
        self, queue_num: int, count: int, visibility_timeout: float | None = None
    ) -> list[StorageTask]:
        return await self.executor.execute(self.ops.get_task(queue_num, count, visibility_timeout))

    async def done_task(self, task_ids: Sequence[int]) -> int:
        return await self.executor.execute(self.ops.done_task(task_ids))

    async def retry_task(self, retries: Sequence[RetryInfo]) -> int:
        return await self.executor.execute(self.ops.retry_task(retries))

    async def put_task(self, request: PutTaskRequest) -> int:
        return await self.executor.execute(self.ops.put_task(request))

    async def put_tasks(self, requests: Sequence[PutTaskRequest]) -> list[int]:
        return await self.executor.execute(self.ops.put_tasks(requests))

    async def get_stat(self) -> Stats:
        return await self.executor.execute(self.ops.get_stat())

    async def beat(self, report: WorkerReport, ttl: float) -> list[int] | None:
        return await self.executor.execute(self.ops.beat(report, ttl))

    async def workers(self) -> list[WorkerReport]:
        return await self.executor.execute(self.ops.workers())

    async def publish_plan(self, plan: Mapping[str, Sequence[int]]) -> int:
        return await self.executor.execute(self.ops.publish_plan(plan))

    async def read_plan(self) -> dict[str, list[int]]:
        return await self.executor.execute(self.ops.read_plan())
