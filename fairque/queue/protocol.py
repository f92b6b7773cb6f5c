"""What every fair queue offers, single or sharded: :class:`Queue` and :class:`AsyncQueue`.

:class:`~fairque.FairQueue` and :class:`~fairque.ShardedQueue` both satisfy
:class:`Queue` (their asyncio twins :class:`AsyncQueue`), so the worker, the metrics and
the Web UI take either. A sharded queue covers all of its shards in every one of these
methods; calls that only make sense on one namespace (``execute``) are not part of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any, Protocol

from fairque.config import QueueSettings
from fairque.engine.executor import AsyncExecutor, Executor
from fairque.engine.records import Record, TaskState
from fairque.queue.client import HAND_OVER_DELAY, MAINTENANCE_INTERVAL, UNSERVED_GRACE
from fairque.queue.models import (
    FairnessView,
    LeasedTask,
    Maintenance,
    QueueStats,
    SharesPage,
    Task,
    TaskInfo,
    TaskPage,
    TenantShares,
    TenantStats,
    TenantStatsPage,
    WorkerInfo,
)
from fairque.queue.ops import STATS_FAIRNESS_TOP


class Queue(Protocol):
    """A fair queue: one namespace, or several shards of one."""

    @property
    def executor(self) -> Executor: ...

    @property
    def wake_channels(self) -> list[str]: ...

    def push(self, task: Task, *, replicas: int = 0, replica_timeout: float = 1.0) -> str: ...

    def push_many(
        self, tasks: Sequence[Task], *, replicas: int = 0, replica_timeout: float = 1.0
    ) -> list[str]: ...

    def pop(
        self,
        count: int = 1,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        worker_id: str | None = None,
        lease_seconds: float | None = None,
    ) -> list[LeasedTask]: ...

    def finish(self, task: LeasedTask, result: Any = None) -> None: ...

    def finish_many(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None
    ) -> list[str]: ...

    def release(self, tasks: Sequence[LeasedTask]) -> list[str]: ...

    def fail(self, task: LeasedTask, error: str = "", *, retry: bool = True) -> TaskState: ...

    def extend(self, task: LeasedTask, seconds: float) -> float: ...

    def cancel(self, task_id: str) -> bool: ...

    def retry(self, task_id: str) -> bool: ...

    def xcom_push(self, task_id: str, key: str, value: Any, ttl: float | None = None) -> None: ...

    def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Any: ...

    def tasks(
        self,
        state: TaskState | str,
        user_id: str | None = None,
        name: str | None = None,
        cursor: int = 0,
        limit: int = 50,
    ) -> TaskPage: ...

    def retry_failed(self, user_id: str) -> int: ...

    def get(self, task_id: str) -> TaskInfo | None: ...

    def get_record(self, record_id: str) -> Record | None: ...

    def result(self, task_id: str, timeout: float | None = None) -> Any: ...

    def stats(self, fairness_top: int = STATS_FAIRNESS_TOP) -> QueueStats: ...

    def busiest_tenants(self, cursor: int = 0, count: int = 50) -> TenantStatsPage: ...

    def tenant_stats(self, tenant: str) -> TenantStats: ...

    def reap(self, limit: int = 1000) -> Maintenance: ...

    def maintain(self, interval: float = MAINTENANCE_INTERVAL) -> Maintenance: ...

    def namespace_settings(self) -> QueueSettings: ...

    def register_worker(self, worker: WorkerInfo, ttl: float) -> None: ...

    def unregister_worker(self, worker_id: str) -> None: ...

    def workers(self) -> list[WorkerInfo]: ...

    def tenant(self, tenant: str) -> TenantShares: ...

    def set_tenant(
        self,
        tenant: str,
        *,
        weight: int | None = None,
        concurrency: int | None = None,
        rate: int | None = None,
        period: float | None = None,
        paused: bool | None = None,
    ) -> TenantShares: ...

    def tenants_with_shares(self, cursor: int = 0, count: int = 100) -> SharesPage: ...

    def fairness(self, minutes: int = 5, top: int = 20) -> FairnessView: ...

    def hand_over(
        self,
        tasks: Sequence[LeasedTask],
        delay: float = HAND_OVER_DELAY,
        grace: float = UNSERVED_GRACE,
    ) -> list[str]: ...

    def next_due(self) -> float | None: ...

    def promote(self, limit: int = 1000) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> Queue: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class AsyncQueue(Protocol):
    """:class:`Queue` for asyncio: every method is a coroutine."""

    @property
    def executor(self) -> AsyncExecutor: ...

    @property
    def wake_channels(self) -> list[str]: ...

    async def push(self, task: Task, *, replicas: int = 0, replica_timeout: float = 1.0) -> str: ...

    async def push_many(
        self, tasks: Sequence[Task], *, replicas: int = 0, replica_timeout: float = 1.0
    ) -> list[str]: ...

    async def pop(
        self,
        count: int = 1,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        worker_id: str | None = None,
        lease_seconds: float | None = None,
    ) -> list[LeasedTask]: ...

    async def finish(self, task: LeasedTask, result: Any = None) -> None: ...

    async def finish_many(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None
    ) -> list[str]: ...

    async def release(self, tasks: Sequence[LeasedTask]) -> list[str]: ...

    async def fail(self, task: LeasedTask, error: str = "", *, retry: bool = True) -> TaskState: ...

    async def extend(self, task: LeasedTask, seconds: float) -> float: ...

    async def cancel(self, task_id: str) -> bool: ...

    async def retry(self, task_id: str) -> bool: ...

    async def xcom_push(
        self, task_id: str, key: str, value: Any, ttl: float | None = None
    ) -> None: ...

    async def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Any: ...

    async def tasks(
        self,
        state: TaskState | str,
        user_id: str | None = None,
        name: str | None = None,
        cursor: int = 0,
        limit: int = 50,
    ) -> TaskPage: ...

    async def retry_failed(self, user_id: str) -> int: ...

    async def get(self, task_id: str) -> TaskInfo | None: ...

    async def get_record(self, record_id: str) -> Record | None: ...

    async def result(self, task_id: str, timeout: float | None = None) -> Any: ...

    async def stats(self, fairness_top: int = STATS_FAIRNESS_TOP) -> QueueStats: ...

    async def busiest_tenants(self, cursor: int = 0, count: int = 50) -> TenantStatsPage: ...

    async def tenant_stats(self, tenant: str) -> TenantStats: ...

    async def reap(self, limit: int = 1000) -> Maintenance: ...

    async def maintain(self, interval: float = MAINTENANCE_INTERVAL) -> Maintenance: ...

    async def namespace_settings(self) -> QueueSettings: ...

    async def register_worker(self, worker: WorkerInfo, ttl: float) -> None: ...

    async def unregister_worker(self, worker_id: str) -> None: ...

    async def workers(self) -> list[WorkerInfo]: ...

    async def tenant(self, tenant: str) -> TenantShares: ...

    async def set_tenant(
        self,
        tenant: str,
        *,
        weight: int | None = None,
        concurrency: int | None = None,
        rate: int | None = None,
        period: float | None = None,
        paused: bool | None = None,
    ) -> TenantShares: ...

    async def tenants_with_shares(self, cursor: int = 0, count: int = 100) -> SharesPage: ...

    async def fairness(self, minutes: int = 5, top: int = 20) -> FairnessView: ...

    async def hand_over(
        self,
        tasks: Sequence[LeasedTask],
        delay: float = HAND_OVER_DELAY,
        grace: float = UNSERVED_GRACE,
    ) -> list[str]: ...

    async def next_due(self) -> float | None: ...

    async def promote(self, limit: int = 1000) -> int: ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> AsyncQueue: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
