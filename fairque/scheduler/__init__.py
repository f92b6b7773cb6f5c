"""Schedules: cron and interval schedules kept in the server, managed by
:class:`Schedules` and run by many :class:`~fairque.TaskScheduler` instances without
duplicates (the run loop is a runner: :mod:`fairque.runners.scheduler`).

>>> from fairque import TaskScheduler  # doctest: +SKIP
>>> scheduler = TaskScheduler()  # doctest: +SKIP
>>> scheduler.add_schedule(cron="*/5 * * * *", task={"name": "sync", "user_id": "alice"})
... # doctest: +SKIP
"""

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
    "Health",
    "HealthStatus",
    "MissedRuns",
    "Schedule",
    "ScheduleInfo",
    "ScheduleState",
    "SchedulerConfig",
    "Schedules",
    "TaskTemplate",
]
