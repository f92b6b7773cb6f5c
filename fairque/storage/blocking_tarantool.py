# Generated from fairque/storage/async_tarantool.py by tools/unasync.py: edit that file instead.
"""The storage in Tarantool: the facade that sends the calls
:class:`~fairque.storage.tarantool.TarantoolOps` builds through one connection
(:mod:`fairque.storage.tarantool`). The asyncio facade, in
:mod:`fairque.storage.async_tarantool` (``asynctnt``: many calls in flight on one
connection), is written by hand; the blocking one, in
:mod:`fairque.storage.blocking_tarantool` (tarantool-python: one call at a time across
threads), is generated from it (``tools/unasync.py``).

>>> storage = TarantoolStorage("tarantool://127.0.0.1:3301", "jobs")  # doctest: +SKIP
>>> storage.put_task(PutTaskRequest(1, b"payload"))  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from fairque.closing import Closeable
from fairque.storage.models import PutTaskRequest, RetryInfo, Stats, StorageTask
from fairque.storage.plan import WorkerReport
from fairque.storage.tarantool import (
    CONNECT_TIMEOUT,
    DEFAULT_PORT,
    REQUEST_TIMEOUT,
    TarantoolAddress,
    TarantoolCall,
    TarantoolConnection,
    TarantoolEndpoint,
    TarantoolOps,
)

T = TypeVar("T")


class TarantoolStorage(Closeable):
    """:class:`~fairque.storage.Storage` on Tarantool, through one connection."""

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
        self.connection = TarantoolConnection(endpoint)
        self.address = endpoint.address

    def execute(self, call: TarantoolCall[T]) -> T:
        """Sends one call and parses its reply."""
        return self.connection.execute(call)

    def get_task(
        self, queue_num: int, count: int, visibility_timeout: float | None = None
    ) -> list[StorageTask]:
        return self.execute(self.ops.get_task(queue_num, count, visibility_timeout))

    def done_task(self, task_ids: Sequence[int]) -> int:
        return self.execute(self.ops.done_task(task_ids))

    def retry_task(self, retries: Sequence[RetryInfo]) -> int:
        return self.execute(self.ops.retry_task(retries))

    def put_task(self, request: PutTaskRequest) -> int:
        return self.execute(self.ops.put_task(request))

    def put_tasks(self, requests: Sequence[PutTaskRequest]) -> list[int]:
        return self.execute(self.ops.put_tasks(requests))

    def get_stat(self) -> Stats:
        return self.execute(self.ops.get_stat())

    def beat(self, report: WorkerReport, ttl: float) -> list[int] | None:
        return self.execute(self.ops.beat(report, ttl))

    def workers(self) -> list[WorkerReport]:
        return self.execute(self.ops.workers())

    def publish_plan(self, plan: Mapping[str, Sequence[int]]) -> int:
        return self.execute(self.ops.publish_plan(plan))

    def read_plan(self) -> dict[str, list[int]]:
        return self.execute(self.ops.read_plan())

    def close(self) -> None:
        self.connection.close()
