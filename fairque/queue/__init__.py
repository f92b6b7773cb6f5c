"""The fair queue: tenants served in a global round robin, priorities without starvation.

:class:`FairQueue` (one namespace) and :class:`ShardedQueue` (the shards of one queue)
are both a :class:`Queue`, whose methods run the plans of
:class:`~fairque.queue.plans.QueuePlans` over the calls of
:class:`~fairque.queue.ops.QueueOps`; :class:`AsyncFairQueue`, :class:`AsyncShardedQueue`
and :class:`AsyncQueue` are their asyncio twins.
"""

from fairque.queue.async_client import AsyncFairQueue, AsyncQueue, AsyncShardedQueue
from fairque.queue.client import FairQueue, Queue, ShardedQueue
from fairque.queue.hooks import ClientHooks
from fairque.queue.models import (
    Backlog,
    FairnessView,
    LeasedTask,
    LimitsPage,
    Maintenance,
    MaintenanceStatus,
    MinuteFigures,
    Priority,
    QueueStats,
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
from fairque.queue.ops import QueueOps
from fairque.queue.shares import LimitsChange, SharesChange

__all__ = [
    "AsyncFairQueue",
    "AsyncQueue",
    "AsyncShardedQueue",
    "Backlog",
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
    "QueueOps",
    "QueueStats",
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
