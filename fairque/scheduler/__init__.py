"""The TaskScheduler (seed 002): cron and interval schedules, run by many instances
without duplicates.

>>> from fairque.scheduler import TaskScheduler  # doctest: +SKIP
>>> scheduler = TaskScheduler()  # doctest: +SKIP
>>> scheduler.add_schedule(cron="*/5 * * * *", task={"name": "sync", "user_id": "alice"})
... # doctest: +SKIP
"""

from fairque.scheduler.client import AsyncTaskScheduler, TaskScheduler
from fairque.scheduler.config import SchedulerConfig
from fairque.scheduler.models import (
    Health,
    HealthStatus,
    MissedRuns,
    Schedule,
    ScheduleInfo,
    ScheduleState,
    TaskTemplate,
)

__all__ = [
    "AsyncTaskScheduler",
    "Health",
    "HealthStatus",
    "MissedRuns",
    "Schedule",
    "ScheduleInfo",
    "ScheduleState",
    "SchedulerConfig",
    "TaskScheduler",
    "TaskTemplate",
]
