"""The fair queue's models: what a user pushes (:class:`Task`) and what comes back."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum, IntEnum
from typing import Any, TypeVar

import pydantic
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ModelWrapValidatorHandler

from fairque.engine.fields import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_PRIORITY,
    DEFAULT_TIMEOUT,
    MAX_RETRIES,
    MAX_TIMEOUT_SECONDS,
)
from fairque.engine.records import (
    AttemptError,
    TaskState,
    check_delay,
    check_identifier,
    check_moment,
)
from fairque.errors import InvalidInput, validated

# Bounds of a task's headers (Task.headers): a few short strings, such as a trace context.
# A value may be as long as W3C baggage may be (8,192 bytes), so whatever a propagator
# writes fits.
MAX_HEADERS = 32
MAX_HEADER_NAME = 64
MAX_HEADER_VALUE = 8_192
_HEADER_NAME = re.compile(rf"[A-Za-z0-9_.-]{{1,{MAX_HEADER_NAME}}}")


def check_headers(headers: Any) -> dict[str, str]:
    """``headers`` as a dict: at most :data:`MAX_HEADERS` names of 1 to
    :data:`MAX_HEADER_NAME` characters ``[A-Za-z0-9_.-]``, each to a string of at most
    :data:`MAX_HEADER_VALUE` characters; ValueError saying what is wrong otherwise."""
    if not isinstance(headers, Mapping):
        raise ValueError(f"must map names to strings, got {type(headers).__name__}")  # noqa: TRY004
    if len(headers) > MAX_HEADERS:
        raise ValueError(f"must hold at most {MAX_HEADERS} entries, got {len(headers)}")
    for name, value in headers.items():
        if not (isinstance(name, str) and _HEADER_NAME.fullmatch(name)):
            raise ValueError(
                f"a name must be 1 to {MAX_HEADER_NAME} letters, digits, '_', '.' or '-',"
                f" got {name!r}"
            )
        if not isinstance(value, str):
            raise ValueError(f"{name}: must be a string, got {type(value).__name__}")  # noqa: TRY004
        if len(value) > MAX_HEADER_VALUE:
            raise ValueError(
                f"{name}: must be at most {MAX_HEADER_VALUE} characters, got {len(value)}"
            )
        if not value.isascii() and not _encodes(value):
            raise ValueError(f"{name}: must be text that UTF-8 can encode (a lone surrogate)")
    return dict(headers)


def _encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


class Priority(IntEnum):
    """Priority of a task within its tenant (1 lowest .. 5 highest).

    ``CRITICAL`` tasks go first, in FIFO order; the others are chosen by urgency
    ``(p / 5) * waiting time``, so a low priority task is delayed, never starved.
    """

    LOWEST = 1
    LOW = 2
    NORMAL = 3
    HIGH = 4
    HIGHEST = 5
    CRITICAL = 6


class Task(BaseModel):
    """A unit of work for one tenant.

    >>> Task(user_id="alice", priority=Priority.HIGH, payload={"report": 42})  # doctest: +SKIP

    Invalid values raise :class:`fairque.InvalidInput` naming the field.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    user_id: str
    # Priority, max_retries and timeout: a task that leaves one out takes its name's
    # default, if the name has one (``FairQueue.set_limits``), else the one shown here.
    priority: Priority | int = Priority(DEFAULT_PRIORITY)  # an int 1..6 becomes a Priority
    payload: Any = None
    name: str | None = None
    task_id: str | None = None
    max_retries: int | None = Field(default=DEFAULT_MAX_RETRIES, ge=0, le=MAX_RETRIES)
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0, le=MAX_TIMEOUT_SECONDS)
    keep_result: bool = False
    execute_after: AwareDatetime | None = None
    delay: timedelta | float | None = None  # seconds, or a timedelta
    depends_on: tuple[str, ...] = Field(default=(), max_length=1000)  # ids that must finish first
    # Small strings carried to the worker with the task (a trace context: see fairque.otel).
    headers: Mapping[str, str] = Field(default_factory=dict)

    @pydantic.model_validator(mode="wrap")
    @classmethod
    def _raise_fairque_error(cls, data: Any, handler: ModelWrapValidatorHandler[Task]) -> Task:
        task = validated(handler, data)
        if task.execute_after is not None and task.delay is not None:
            raise InvalidInput("delay", "give execute_after or delay, not both")
        if task.task_id is not None and task.task_id in task.depends_on:
            raise InvalidInput("depends_on", f"task {task.task_id!r} cannot depend on itself")
        return task

    @pydantic.field_validator("user_id", "task_id", "name")
    @classmethod
    def _check_identifiers(cls, value: str | None) -> str | None:
        return None if value is None else check_identifier(value)

    @pydantic.field_validator("depends_on")
    @classmethod
    def _check_dependencies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for task_id in value:
            check_identifier(task_id)
        if len(set(value)) != len(value):
            raise ValueError("names a task twice")
        return value

    @pydantic.field_validator("headers", mode="before")
    @classmethod
    def _check_headers(cls, value: Any) -> dict[str, str]:
        return check_headers(value)

    @pydantic.field_validator("priority", mode="before")
    @classmethod
    def _to_priority(cls, value: Any) -> Priority:
        if isinstance(value, bool) or value not in Priority._value2member_map_:
            raise ValueError(f"must be 1 to 5 or Priority.CRITICAL (6), got {value!r}")
        return Priority(value)

    @pydantic.field_validator("delay", mode="before")
    @classmethod
    def _to_timedelta(cls, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return timedelta(seconds=check_delay(value))  # before timedelta can overflow
        return value

    @pydantic.field_validator("delay")
    @classmethod
    def _check_delay(cls, value: timedelta | None) -> timedelta | None:
        if value is not None:
            check_delay(value.total_seconds())
        return value

    @pydantic.field_validator("execute_after")
    @classmethod
    def _check_execute_after(cls, value: datetime | None) -> datetime | None:
        return None if value is None else check_moment(value)


@dataclass(slots=True)
class LeasedTask:
    """A task handed to a worker, which holds it until ``lease_deadline``.

    Pass it back to ``finish``, ``fail`` or ``extend``: the ``lease_token`` proves the
    caller still holds the lease, so a worker whose lease expired cannot overwrite the
    outcome of the worker that holds the task now.
    """

    task_id: str
    user_id: str
    priority: Priority
    name: str | None
    payload: Any
    attempts: int  # failed or expired attempts before this one (0 on first delivery)
    lease_deadline: float  # epoch seconds, server clock
    lease_token: str
    timeout: float
    max_retries: int | None
    created_at: float
    start_time: float  # when this attempt became available
    prev_start_time: float | None  # when the previous attempt did
    headers: dict[str, str] = field(default_factory=dict)  # as pushed (Task.headers)

    def log_fields(self) -> dict[str, Any]:
        """The fields a log line about this task carries (``extra=``); JSON log lines
        show them (:mod:`fairque.logs`)."""
        return {"task_id": self.task_id, "tenant": self.user_id, "task_name": self.name,
                "attempt": self.attempts + 1}  # fmt: skip


@dataclass(frozen=True)
class TaskInfo:
    """Everything stored about one task (see ``FairQueue.get``)."""

    task_id: str
    user_id: str
    priority: Priority
    state: TaskState
    name: str | None
    payload: Any
    attempts: int
    max_retries: int | None
    timeout: float
    keep_result: bool
    created_at: float
    execute_after: float | None
    start_time: float | None
    prev_start_time: float | None
    leased_at: float | None
    lease_deadline: float | None
    lease_token: str | None  # of the last lease: increases with every lease in the namespace
    worker_id: str | None
    last_error: str | None
    finished_at: float | None
    result: Any = None
    # The newest attempts' errors (records.ERRORS_KEPT), the oldest first: a task that
    # failed and then finished keeps those of its failed attempts.
    errors: tuple[AttemptError, ...] = ()
    has_result: bool = False
    blocked_by: tuple[str, ...] = ()  # dependencies that have not finished
    dependents: tuple[str, ...] = ()  # tasks waiting for this one
    progress: float | None = None  # what the task last reported (TaskContext.progress)
    progress_message: str | None = None
    progress_at: float | None = None  # when it last reported progress (server time)
    logs: tuple[str, ...] = ()  # the newest lines it logged (TaskContext.log)
    headers: dict[str, str] = field(default_factory=dict)  # as pushed (Task.headers)


@dataclass(frozen=True)
class TaskSummary:
    """One line of a task list (see ``FairQueue.tasks``); strict jobs have no user_id."""

    task_id: str
    user_id: str | None
    name: str | None
    state: str  # "expired" when the task's record was dropped while the page was read
    priority: int
    attempts: int
    created_at: float | None
    worker_id: str | None  # of the last lease
    last_error: str | None = None  # of a failed attempt (a failed task's, a retry's)


@dataclass(frozen=True)
class TaskPage:
    """A page of a task list; pass ``cursor`` back for the next page (0: no more)."""

    tasks: list[TaskSummary]
    cursor: int

    def size(self) -> int:
        """How many entries the page holds."""
        return len(self.tasks)

    @classmethod
    def joined(cls, pages: Sequence[TaskPage], cursor: int) -> TaskPage:
        """One page of ``pages``' entries, in order, with ``cursor`` (a sharded list's)."""
        return cls([one for page in pages for one in page.tasks], cursor)


@dataclass(frozen=True)
class TenantStats:
    """Per-tenant figures: ready backlog and lifetime counters."""

    queued: int = 0
    pushed: int = 0
    finished: int = 0
    failed: int = 0
    retried: int = 0
    requeued: int = 0
    canceled: int = 0
    expired: int = 0


STATS_TENANTS = 20  # the busiest tenants QueueStats holds


@dataclass(frozen=True)
class TenantShares:
    """A tenant's shares, and where it stands now (``FairQueue.tenant``). Its share
    fields are those of :data:`~fairque.queue.shares.SHARES`, with their defaults."""

    tenant: str
    weight: int = 1
    concurrency: int = 0  # STARTED at once across all workers; 0: no limit
    rate: int = 0  # starts per `period` seconds; 0: no limit
    period: float = 0.0
    paused: bool = False
    running: int = 0  # its tasks STARTED now
    ready: int = 0  # its tasks queued and ready
    servable: bool = False  # in the ring: a pop may serve it now
    window_opens_at: float | None = None  # held by its rate limit until then (epoch s)


@dataclass(frozen=True)
class TaskLimits:
    """A task name's limits across all workers (``FairQueue.limits``), on top of each
    tenant's shares: a task starts only when both allow. Its fields are those of
    :data:`~fairque.queue.shares.LIMITS`, with their defaults."""

    name: str
    concurrency: int = 0  # its tasks STARTED at once across all workers; 0: no limit
    rate: int = 0  # starts per `period` seconds; 0: no limit
    period: float = 0.0
    paused: bool = False  # no worker starts its tasks
    timeout: float = 0.0  # its tasks' timeout when a push gives none; 0: not set
    max_retries: int = -1  # its tasks' retries when a push gives none; -1: not set
    priority: int = 0  # its tasks' priority when a push gives none; 0: not set
    lease: float = 0.0  # the lease of its tasks when a pop names none; 0: their timeout
    running: int = 0  # its tasks STARTED now, counted while it has limits
    window_opens_at: float | None = None  # held by its rate limit until then (epoch s)


@dataclass(frozen=True)
class LimitsPage:
    """A page of task names with limits; pass ``cursor`` back for the next page (0: no
    more)."""

    names: list[TaskLimits]
    cursor: int


WAIT_BUCKETS = 48  # include/figures.lua: bucket b >= 1 holds waits below 1.5^b ms


def wait_percentile(waits: tuple[int, ...], fraction: float) -> float | None:
    """The wait (seconds) below which ``fraction`` of the starts counted in ``waits`` (a
    histogram of include/figures.lua) fell: the upper edge of the bucket where that
    fraction is reached, so at most 1.5 times the true figure; None with no start."""
    total = sum(waits)
    if total == 0:
        return None
    rank = fraction * total
    seen = 0
    for bucket, count in enumerate(waits):
        seen += count
        if seen >= rank:
            return 1.5**bucket / 1000 if bucket else 0.001
    return 1.5 ** (len(waits) - 1) / 1000  # pragma: no cover - the loop reaches the total


class Waits:
    """The percentiles of a histogram of waits from ready to start (``waits``)."""

    waits: tuple[int, ...]

    @property
    def wait_p50(self) -> float | None:
        """Median wait from ready to start, seconds (upper bucket edge)."""
        return wait_percentile(self.waits, 0.50)

    @property
    def wait_p99(self) -> float | None:
        """99th percentile wait from ready to start, seconds (upper bucket edge)."""
        return wait_percentile(self.waits, 0.99)


@dataclass(frozen=True)
class TenantService(Waits):
    """How the queue served one tenant over a fairness window."""

    tenant: str
    starts: int  # tasks started in the window
    share: float  # of all starts in the window (0..1)
    per_minute: float
    waits: tuple[int, ...]  # histogram of ready-to-start waits (see wait_percentile)
    shares: TenantShares  # its weight and limits, and how many run now
    starts_by_minute: tuple[int, ...] = ()  # one per minute of the window, oldest first


@dataclass(frozen=True)
class MinuteFigures:
    """What one minute of server time saw, in all (kept by the scripts for 11 minutes)."""

    at: float  # the minute's start, epoch seconds
    starts: int
    pushed: int
    finished: int
    failed: int


@dataclass(frozen=True)
class FairnessView(Waits):
    """Who the queue served over the last ``minutes`` (``FairQueue.fairness``): every
    start, and the busiest tenants; the rest add up to ``other_starts``."""

    at: float  # server time, epoch seconds
    minutes: int
    starts: int
    waits: tuple[int, ...]  # every start's wait, as in TenantService.waits
    tenants: list[TenantService]  # the busiest first
    other_starts: int  # starts of the tenants not listed
    history: list[MinuteFigures] = field(default_factory=list)  # the window's minutes

    @property
    def per_minute(self) -> float:
        """Tasks started per minute over the window."""
        return self.starts / self.minutes

    @property
    def other_waits(self) -> tuple[int, ...]:
        """The waits of the tenants not listed (every start's, less the listed ones')."""
        listed = [0] * len(self.waits)
        for one in self.tenants:
            listed = [n + m for n, m in zip(listed, one.waits, strict=True)]
        return tuple(n - m for n, m in zip(self.waits, listed, strict=True))


@dataclass(frozen=True)
class SharesPage:
    """A page of tenants with shares; pass ``cursor`` back for the next page (0: no more)."""

    tenants: list[TenantShares]
    cursor: int

    def size(self) -> int:
        """How many entries the page holds."""
        return len(self.tenants)

    @classmethod
    def joined(cls, pages: Sequence[SharesPage], cursor: int) -> SharesPage:
        """One page of ``pages``' entries, in order, with ``cursor`` (a sharded list's)."""
        return cls([one for page in pages for one in page.tenants], cursor)


@dataclass(frozen=True)
class Backlog:
    """How long ready fair tasks have waited (``FairQueue.backlog``): per tenant looked at
    (the busiest and those served longest ago), the age of its oldest ready task."""

    ages: dict[str, float]  # tenant: seconds its oldest ready task has waited

    @property
    def oldest(self) -> float | None:
        """The oldest ready task's age among them (seconds); None with nothing ready."""
        return max(self.ages.values(), default=None)


@dataclass(frozen=True)
class WorkerInfo:
    """A live worker of the namespace, as it registered itself (see ``FairQueue.workers``)."""

    worker_id: str
    host: str
    pid: int
    functions: tuple[str, ...]  # the task function names it serves
    concurrency: int
    in_flight: int  # tasks running at its last beat
    started_at: float  # epoch seconds
    seen_at: float = 0.0  # its last beat, epoch seconds (server clock)


@dataclass(frozen=True)
class Maintenance:
    """What one maintenance round did (see ``FairQueue.reap`` and ``maintain``)."""

    expired: int  # leases that had expired, returned to the queue or failed
    promoted: int  # scheduled tasks made ready
    dropped: int  # ids of expired finished/failed/canceled tasks dropped from registries
    orphaned: int  # deferred tasks canceled because a dependency no longer exists
    ran: bool = True  # False: the namespace's last round is recent, none was due
    more: bool = False  # a bound was reached: the next round is due at once


@dataclass(frozen=True)
class WorkerUpkeep:
    """What a worker's upkeep call found (see ``FairQueue.upkeep``): what it needs to wait."""

    registered: bool  # the worker was registered before the call (False: it is now)
    next_due: float | None  # seconds until work comes due without a push; None: never
    ready: bool  # a tenant may be served now in a lane the worker serves
    round_due: bool  # the namespace's maintenance round is due (``maintain`` runs it)


@dataclass(frozen=True)
class MaintenanceStatus:
    """The namespace's maintenance as stored by its rounds (all shards, when sharded)."""

    last_run_at: float | None = None  # epoch seconds (server clock); None: never ran
    rounds: int = 0
    dropped: int = 0  # registry entries dropped by all rounds
    last: Maintenance | None = None  # what the last round did (one namespace only)


@dataclass(frozen=True)
class QueueStats:
    """Tasks per state now, lifetime counters, and the busiest tenants' figures.

    Reading it costs the same with ten tenants or a million: ``tenants`` holds the
    busiest ones (most ready tasks first, at most ``STATS_TENANTS``); ``all_tenants``
    sums every tenant's figures, and :meth:`FairQueue.busiest_tenants` pages through the
    rest.
    """

    states: dict[TaskState, int]
    counters: dict[str, int]
    tenants: dict[str, TenantStats] = field(default_factory=dict)
    maintenance: MaintenanceStatus = field(default_factory=MaintenanceStatus)
    fairness: FairnessView | None = None  # the last 5 minutes, the 20 busiest tenants
    all_tenants: TenantStats = field(default_factory=TenantStats)  # summed over every tenant
    tenants_with_ready: int = 0  # how many tenants have ready tasks


@dataclass(frozen=True)
class TenantStatsPage:
    """A page of tenants with ready tasks, the busiest first (shard after shard, when
    sharded); pass ``cursor`` back for the next page (0: no more). Rankings move as tasks
    come and go, so between pages a tenant may move to another page."""

    tenants: dict[str, TenantStats]
    cursor: int

    def size(self) -> int:
        """How many entries the page holds."""
        return len(self.tenants)

    @classmethod
    def joined(cls, pages: Sequence[TenantStatsPage], cursor: int) -> TenantStatsPage:
        """One page of ``pages``' entries, in order, with ``cursor`` (a sharded list's)."""
        return cls(
            {tenant: figures for page in pages for tenant, figures in page.tenants.items()}, cursor
        )


EnumT = TypeVar("EnumT", bound=Enum)


def member_of(kind: type[EnumT], value: EnumT | str, input_name: str) -> EnumT:
    """``value`` as a member of the string enum ``kind``; InvalidInput naming
    ``input_name`` and the choices otherwise."""
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(member.value for member in kind)
        raise InvalidInput(input_name, f"must be one of {choices}, got {value!r}") from None


def task_state(value: TaskState | str) -> TaskState:
    """``value`` as a :class:`TaskState`; InvalidInput naming the states otherwise."""
    return member_of(TaskState, value, "state")


MAX_BULK_AGE = 10 * 366 * 24 * 3600.0  # seconds: Selector.older_than's bound


class BulkAction(str, Enum):
    """What a bulk operation (``FairQueue.bulk``) does to the tasks it selects."""

    RETRY = "retry"  # failed tasks queued again now
    CANCEL = "cancel"  # waiting tasks (scheduled, deferred, queued) canceled, and their dependents
    DELETE = "delete"  # ended tasks (finished, failed, canceled) deleted at once


@dataclass(frozen=True)
class Selector:
    """Which fair-queue tasks a bulk operation acts on: those in ``state`` (None: every
    state the action takes), of tenant ``user_id`` and task ``name`` if given, that ended
    (or, waiting ones, were pushed) at least ``older_than`` seconds before the operation
    began. InvalidInput names what is wrong."""

    state: TaskState | None = None
    user_id: str | None = None
    name: str | None = None
    older_than: float = 0.0

    def __post_init__(self) -> None:
        if self.state is not None:
            object.__setattr__(self, "state", task_state(self.state))
        for value, field_name in ((self.user_id, "user_id"), (self.name, "name")):
            if value is not None:
                try:
                    check_identifier(value)
                except ValueError as exc:
                    raise InvalidInput(field_name, str(exc)) from None
        age = self.older_than
        if (
            isinstance(age, bool)
            or not isinstance(age, (int, float))
            or not 0 <= age <= MAX_BULK_AGE
        ):
            raise InvalidInput("older_than", f"must be 0 to {MAX_BULK_AGE:g} seconds, got {age!r}")


@dataclass(frozen=True)
class BulkBatch:
    """What one batch of a bulk operation did; pass ``cursor`` back for the next batch
    (None: the operation is done)."""

    cursor: str | None
    looked: int  # entries it looked at
    selected: int  # tasks it selected: acted on, or only counted in a dry run
    state: TaskState  # where it looked
    total: int  # entries in that state (on that shard, when sharded) after the batch
