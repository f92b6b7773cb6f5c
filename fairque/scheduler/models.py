"""What a schedule is: when it runs, and the task each run submits."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

import pydantic
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ModelWrapValidatorHandler

from fairque.engine.fields import MAX_RETRIES, MAX_TIMEOUT_SECONDS
from fairque.engine.records import check_identifier, check_moment
from fairque.errors import InvalidInput, validated
from fairque.queue.models import Priority, Task
from fairque.scheduler import cron

MAX_INTERVAL_SECONDS = 366 * 24 * 3600.0


class MissedRuns(str, Enum):
    """What happens to a run missed by more than ``misfire_grace`` (e.g. while no scheduler
    instance was running); either way the runs missed after it are dropped."""

    RUN_ONCE = "run_once"  # all missed runs become one run, submitted now
    SKIP = "skip"  # missed runs are dropped; the schedule goes on with the next one


class ScheduleState(str, Enum):
    """Whether a schedule submits runs."""

    ACTIVE = "active"
    PAUSED = "paused"  # by pause_schedule(); resume_schedule() makes it active again
    FAILED = "failed"  # its submissions failed max_submit_retries times in a row


class TaskTemplate(BaseModel):
    """The task each run submits: a registered function, its arguments, and the tenant."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)  # the @task function's registered name
    user_id: str = Field(min_length=1)
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    priority: int = Priority.NORMAL
    max_retries: int | None = Field(default=3, ge=0, le=MAX_RETRIES)
    timeout: float = Field(default=300.0, gt=0, le=MAX_TIMEOUT_SECONDS)
    keep_result: bool = False

    @pydantic.field_validator("name", "user_id")
    @classmethod
    def _check_identifiers(cls, value: str) -> str:
        return check_identifier(value)

    @pydantic.field_validator("priority")
    @classmethod
    def _check_priority(cls, value: int) -> int:
        if value not in Priority._value2member_map_:
            raise ValueError(f"must be 1 to 5 or Priority.CRITICAL (6), got {value!r}")
        return value

    def build(self, task_id: str) -> Task:
        """The task of one run."""
        return Task(
            task_id=task_id,
            user_id=self.user_id,
            name=self.name,
            priority=self.priority,
            payload={"args": self.args, "kwargs": self.kwargs},
            max_retries=self.max_retries,
            timeout=self.timeout,
            keep_result=self.keep_result,
        )


class Schedule(BaseModel):
    """A cron expression (with its time zone) or a fixed interval, and a task template.

    >>> Schedule(cron="*/5 * * * *", timezone="Europe/Berlin",
    ...          task=TaskTemplate(name="report", user_id="alice"))  # doctest: +SKIP
    >>> Schedule(interval=30, task={"name": "ping", "user_id": "ops"})  # doctest: +SKIP

    Invalid values raise :class:`fairque.InvalidInput` naming the part that is wrong,
    e.g. ``cron: minute field: 61 out of range 0-59``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: TaskTemplate
    cron: str | None = None
    timezone: str = "UTC"  # the time zone the cron expression is read in
    interval: float | None = Field(default=None, gt=0, le=MAX_INTERVAL_SECONDS)  # seconds
    start_at: AwareDatetime | None = None  # first run of an interval schedule (default: now)
    missed: MissedRuns = MissedRuns.RUN_ONCE
    # A run later than this (s) is missed; later runs within it are caught up one by one.
    misfire_grace: float = Field(default=10.0, gt=0, le=MAX_INTERVAL_SECONDS)
    schedule_id: str | None = None  # generated when not given

    @pydantic.model_validator(mode="wrap")
    @classmethod
    def _raise_fairque_error(
        cls, data: Any, handler: ModelWrapValidatorHandler[Schedule]
    ) -> Schedule:
        schedule = validated(handler, data)
        if (schedule.cron is None) == (schedule.interval is None):
            raise InvalidInput("schedule", "give either cron or interval (exactly one)")
        if schedule.cron is not None:
            cron.check(schedule.cron, schedule.timezone)
        elif schedule.timezone != "UTC":
            cron.zone(schedule.timezone)
        if schedule.start_at is not None and schedule.cron is not None:
            raise InvalidInput("start_at", "only interval schedules have a start time")
        return schedule

    @pydantic.field_validator("schedule_id")
    @classmethod
    def _check_id(cls, value: str | None) -> str | None:
        return None if value is None else check_identifier(value)

    @pydantic.field_validator("start_at")
    @classmethod
    def _check_start(cls, value: datetime | None) -> datetime | None:
        return None if value is None else check_moment(value)


@dataclass(frozen=True)
class ScheduleInfo:
    """A stored schedule and what it has done (see ``TaskScheduler.get_schedule``)."""

    schedule_id: str
    schedule: Schedule
    state: ScheduleState
    next_run: float | None  # epoch seconds; None unless active
    version: int  # increases with every update
    runs: int = 0  # runs submitted
    skipped: int = 0  # missed runs dropped (MissedRuns.SKIP)
    failures: int = 0  # submissions failed in a row (0 after a success)
    last_run: float | None = None  # when the last submitted run was due
    last_submitted_at: float | None = None
    last_task_id: str | None = None
    last_error: str | None = None


class HealthStatus(str, Enum):
    """The scheduler's health levels."""

    OK = "ok"
    WARNING = "warning"
    ERROR = "error"


@dataclass(frozen=True)
class Health:
    """The result of ``health_check()``: a level and what it is based on."""

    status: HealthStatus
    details: dict[str, Any] = field(default_factory=dict)
    problems: tuple[str, ...] = ()  # why the status is not OK, one line each
