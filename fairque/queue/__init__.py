"""The fair queue: tenants served in a global round robin, priorities without starvation.

:class:`FairQueue` and :class:`AsyncFairQueue` send the calls of
:class:`~fairque.queue.ops.QueueOps`; :class:`ShardedQueue` and
:class:`AsyncShardedQueue` hold one such queue per shard. All four satisfy
:class:`~fairque.queue.protocol.Queue` (or its asyncio twin).
"""

from fairque.queue.client import AsyncFairQueue, FairQueue
from fairque.queue.models import (
    FairnessView,
    LeasedTask,
    Maintenance,
    MaintenanceStatus,
    MinuteFigures,
    Priority,
    QueueStats,
    SharesChange,
    SharesPage,
    Task,
    TaskInfo,
    TaskPage,
    TaskSummary,
    TenantService,
    TenantShares,
    TenantStats,
    TenantStatsPage,
    WorkerInfo,
)
from fairque.queue.ops import QueueOps
from fairque.queue.protocol import AsyncQueue, Queue
from fairque.queue.sharded import AsyncShardedQueue, ShardedQueue

__all__ = [
    "AsyncFairQueue",
    "AsyncQueue",
    "AsyncShardedQueue",
    "FairQueue",
    "FairnessView",
    "LeasedTask",
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
    "TaskPage",
    "TaskSummary",
    "TenantService",
    "TenantShares",
    "TenantStats",
    "TenantStatsPage",
    "WorkerInfo",
]
