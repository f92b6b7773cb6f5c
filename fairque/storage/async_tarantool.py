"""The storage in Tarantool: the facade that sends the calls
:class:`~fairque.storage.tarantool.TarantoolOps` builds through one connection
(:mod:`fairque.storage.tarantool`). The asyncio facade, in
:mod:`fairque.storage.async_tarantool` (``asynctnt``: many calls in flight on one
connection), is written by hand; the blocking one, in
:mod:`fairque.storage.blocking_tarantool` (tarantool-python: one call at a time across
threads), is generated from it (``tools/unasync.py``).

>>> storage = AsyncTarantoolStorage("tarantool://127.0.0.1:3301", "jobs")  # doctest: +SKIP
>>> await storage.put_task(PutTaskRequest(1, b"payload"))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from fairque.closing import AsyncCloseable
from fairque.storage.models import PutTaskRequest, RetryInfo, Stats, StorageTask
from fairque.storage.plan import WorkerReport
from fairque.storage.tarantool import (
    CONNECT_TIMEOUT,
    DEFAULT_PORT,
    REQUEST_TIMEOUT,
    AsyncTarantoolConnection,
    TarantoolAddress,
    TarantoolCall,
    TarantoolEndpoint,
    TarantoolOps,
)

T = TypeVar("T")


class AsyncTarantoolStorage(AsyncCloseable):
    """:class:`~fairque.storage.AsyncStorage` on Tarantool, through one connection."""

    def __init__(
        self,
        url: str = f"tarantool://127.0.0.1:{DEFAULT_PORT}",
        namespace: str = "default",
        *,
        visibility_timeout: float | None = None,
        connect_timeout: float = CONNECT_TIMEOUT,
        request_timeout: float = REQUEST_TIMEOUT,
    ) -> None:
        self.ops = TarantoolOps(namespace, visibility_timeout)
        endpoint = TarantoolEndpoint(TarantoolAddress.parse(url), connect_timeout, request_timeout)
        self.connection = AsyncTarantoolConnection(endpoint)
        self.address = endpoint.address

    async def execute(self, call: TarantoolCall[T]) -> T:
        """Sends one call and parses its reply."""
        return await self.connection.execute(call)

    async def get_task(
        self, queue_num: int, count: int, visibility_timeout: float | None = None
    ) -> list[StorageTask]:
        return await self.execute(self.ops.get_task(queue_num, count, visibility_timeout))

    async def done_task(self, task_ids: Sequence[int]) -> int:
        return await self.execute(self.ops.done_task(task_ids))

    async def retry_task(self, retries: Sequence[RetryInfo]) -> int:
        return await self.execute(self.ops.retry_task(retries))

    async def put_task(self, request: PutTaskRequest) -> int:
        return await self.execute(self.ops.put_task(request))

    async def put_tasks(self, requests: Sequence[PutTaskRequest]) -> list[int]:
        return await self.execute(self.ops.put_tasks(requests))

    async def get_stat(self) -> Stats:
        return await self.execute(self.ops.get_stat())

    async def beat(self, report: WorkerReport, ttl: float) -> list[int] | None:
        return await self.execute(self.ops.beat(report, ttl))

    async def workers(self) -> list[WorkerReport]:
        return await self.execute(self.ops.workers())

    async def publish_plan(self, plan: Mapping[str, Sequence[int]]) -> int:
        return await self.execute(self.ops.publish_plan(plan))

    async def read_plan(self) -> dict[str, list[int]]:
        return await self.execute(self.ops.read_plan())

    async def close(self) -> None:
        await self.connection.close()
