"""The TaskScheduler: cron and interval schedules, run by many instances
without duplicates.

>>> from fairque.scheduler import TaskScheduler  # doctest: +SKIP
>>> scheduler = TaskScheduler()  # doctest: +SKIP
>>> scheduler.add_schedule(cron="*/5 * * * *", task={"name": "sync", "user_id": "alice"})
... # doctest: +SKIP
"""

from fairque.runners.scheduler import AsyncTaskScheduler, TaskScheduler
from fairque.scheduler.async_client import AsyncSchedules
from fairque.scheduler.client import Schedules
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
    "AsyncSchedules",
    "AsyncTaskScheduler",
    "Health",
    "HealthStatus",
    "MissedRuns",
    "Schedule",
    "ScheduleInfo",
    "ScheduleState",
    "SchedulerConfig",
    "Schedules",
    "TaskScheduler",
    "TaskTemplate",
]
