"""fairque: a Redis/Valkey task queue that is fair between tenants.

>>> from fairque import FairQueue, Task, Priority  # doctest: +SKIP
>>> q = FairQueue()  # doctest: +SKIP
>>> q.push(Task(user_id="alice", priority=Priority.HIGH, payload={"n": 1}))  # doctest: +SKIP

Every entry point a user starts from is here: the fair queue (:class:`FairQueue`,
sharded or not, and its :class:`Worker`), strict-policy jobs (:class:`JobQueue`), the
:class:`TaskScheduler`, and the numbered-queue storages (:class:`Storage`).
"""

from fairque.config import QueueSettings
from fairque.engine.async_executor import AsyncExecutor
from fairque.engine.executor import Executor
from fairque.engine.records import AttemptError, ErrorReport, RecordKind, TaskState
from fairque.errors import (
    DuplicateTask,
    EmbeddedServerError,
    FairQueueError,
    InvalidInput,
    LeaseLost,
    NewerDataFormat,
    NotReplicated,
    ResultNotKept,
    ResultTimeout,
    ScheduleChanged,
    ScheduleNotFound,
    ServerTimeout,
    ServerUnavailable,
    TaskFailed,
    TaskNotFound,
)
from fairque.jobs import AsyncJobQueue, Constraint, Job, JobQueue, Matcher
from fairque.queue import (
    AsyncFairQueue,
    AsyncQueue,
    AsyncShardedQueue,
    ClientHooks,
    FairQueue,
    LeasedTask,
    Maintenance,
    Priority,
    Queue,
    QueueStats,
    ShardedQueue,
    Task,
    TaskInfo,
    TaskLimits,
    TenantShares,
    TenantStats,
    TenantStatsPage,
)
from fairque.runners.scheduler import AsyncTaskScheduler, TaskScheduler
from fairque.scheduler import Schedule, SchedulerConfig
from fairque.storage import (
    AsyncMemoryStorage,
    AsyncRedisStorage,
    AsyncStorage,
    MemoryStorage,
    PutTaskRequest,
    RedisStorage,
    RetryInfo,
    Storage,
)
from fairque.worker import Worker, WorkerConfig, task

__all__ = [
    "AsyncExecutor",
    "AsyncFairQueue",
    "AsyncJobQueue",
    "AsyncMemoryStorage",
    "AsyncQueue",
    "AsyncRedisStorage",
    "AsyncShardedQueue",
    "AsyncStorage",
    "AsyncTaskScheduler",
    "AttemptError",
    "ClientHooks",
    "Constraint",
    "DuplicateTask",
    "EmbeddedServerError",
    "ErrorReport",
    "Executor",
    "FairQueue",
    "FairQueueError",
    "InvalidInput",
    "Job",
    "JobQueue",
    "LeaseLost",
    "LeasedTask",
    "Maintenance",
    "Matcher",
    "MemoryStorage",
    "NewerDataFormat",
    "NotReplicated",
    "Priority",
    "PutTaskRequest",
    "Queue",
    "QueueSettings",
    "QueueStats",
    "RecordKind",
    "RedisStorage",
    "ResultNotKept",
    "ResultTimeout",
    "RetryInfo",
    "Schedule",
    "ScheduleChanged",
    "ScheduleNotFound",
    "SchedulerConfig",
    "ServerTimeout",
    "ServerUnavailable",
    "ShardedQueue",
    "Storage",
    "Task",
    "TaskFailed",
    "TaskInfo",
    "TaskLimits",
    "TaskNotFound",
    "TaskScheduler",
    "TaskState",
    "TenantShares",
    "TenantStats",
    "TenantStatsPage",
    "Worker",
    "WorkerConfig",
    "task",
]
