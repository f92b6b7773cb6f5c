"""fairque: a Redis/Valkey task queue that is fair between tenants.

>>> from fairque import FairQueue, Task, Priority  # doctest: +SKIP
>>> q = FairQueue()  # doctest: +SKIP
>>> q.push(Task(user_id="alice", priority=Priority.HIGH, payload={"n": 1}))  # doctest: +SKIP
"""

from fairque.client import AsyncFairQueue, AsyncShardedQueue, FairQueue, ShardedQueue
from fairque.client.jobs import AsyncJobQueue, JobQueue
from fairque.config import QueueSettings
from fairque.errors import (
    DuplicateTask,
    EmbeddedServerError,
    FairQueueError,
    InvalidInput,
    LeaseLost,
    NotReplicated,
    TaskNotFound,
)
from fairque.jobs import Constraint, Job, Matcher
from fairque.models import (
    LeasedTask,
    Priority,
    QueueStats,
    Task,
    TaskInfo,
    TaskState,
    TenantStats,
)
from fairque.ops import Maintenance

__all__ = [
    "AsyncFairQueue",
    "AsyncJobQueue",
    "AsyncShardedQueue",
    "Constraint",
    "DuplicateTask",
    "EmbeddedServerError",
    "FairQueue",
    "FairQueueError",
    "InvalidInput",
    "Job",
    "JobQueue",
    "LeaseLost",
    "LeasedTask",
    "Maintenance",
    "Matcher",
    "NotReplicated",
    "Priority",
    "QueueSettings",
    "QueueStats",
    "ShardedQueue",
    "Task",
    "TaskInfo",
    "TaskNotFound",
    "TaskState",
    "TenantStats",
]
