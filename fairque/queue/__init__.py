"""The fair queue: tenants served in a global round robin, priorities without starvation.

:class:`FairQueue` (one namespace) and :class:`ShardedQueue` (the shards of one queue)
are both a :class:`Queue`, each of whose methods names where it runs
(:class:`~fairque.queue.plans.QueuePlans`) and the call it makes there
(:mod:`fairque.queue.calls`); :class:`AsyncFairQueue`, :class:`AsyncShardedQueue` and
:class:`AsyncQueue` are their asyncio twins.
"""

from fairque.queue.async_client import AsyncFairQueue, AsyncQueue, AsyncShardedQueue
from fairque.queue.client import FairQueue, Queue, ShardedQueue
from fairque.queue.hooks import ClientHooks
from fairque.queue.models import (
    Backlog,
    BulkAction,
    BulkBatch,
    FairnessView,
    LeasedTask,
    LimitsPage,
    Maintenance,
    MaintenanceStatus,
    MinuteFigures,
    Priority,
    QueueStats,
    Selector,
    SharesPage,
    Task,
    TaskInfo,
    TaskLimits,
    TaskPage,
    TaskSummary,
    TenantService,
    TenantShares,
    TenantStats,
    TenantStatsPage,
    WorkerInfo,
)
from fairque.queue.shares import LimitsChange, SharesChange

__all__ = [
    "AsyncFairQueue",
    "AsyncQueue",
    "AsyncShardedQueue",
    "Backlog",
    "BulkAction",
    "BulkBatch",
    "ClientHooks",
    "FairQueue",
    "FairnessView",
    "LeasedTask",
    "LimitsChange",
    "LimitsPage",
    "Maintenance",
    "MaintenanceStatus",
    "MinuteFigures",
    "Priority",
    "Queue",
    "QueueStats",
    "Selector",
    "ShardedQueue",
    "SharesChange",
    "SharesPage",
    "Task",
    "TaskInfo",
    "TaskLimits",
    "TaskPage",
    "TaskSummary",
    "TenantService",
    "TenantShares",
    "TenantStats",
    "TenantStatsPage",
    "WorkerInfo",
]
