"""The Web UI API's answer bodies (:mod:`fairque.http.ui` serves them), and how they are
made from the queue's, the jobs' and the scheduler's models: the pages read these
fields, so a body changes only with its page.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Collection
from dataclasses import asdict, dataclass, field

from fairque.engine.records import Record, RecordKind
from fairque.http.protocol import WorkerStatus
from fairque.jobs import JobInfo, JobOutcome
from fairque.jobs.ops import job_info, kept_outcome
from fairque.queue import (
    FairnessView,
    MinuteFigures,
    TaskInfo,
    TenantShares,
    TenantStats,
    WorkerInfo,
)
from fairque.queue.calls.tasks import task_info
from fairque.scheduler import ScheduleInfo


@dataclass(frozen=True)
class Rate:
    """Tasks per second between two samples, ending at ``at`` (epoch seconds)."""

    at: float
    pushed: float
    finished: float
    failed: float


@dataclass(frozen=True)
class TenantRow:
    """A tenant's ready backlog and lifetime counters, and whether it is paused."""

    user_id: str
    queued: int
    pushed: int
    finished: int
    failed: int
    retried: int
    requeued: int
    canceled: int
    expired: int
    paused: bool


@dataclass(frozen=True)
class UiOverview:
    """Everything the overview page shows."""

    namespace: str
    states: dict[str, int]
    counters: dict[str, int]
    tenants: list[TenantRow]  # the busiest (most ready tasks first), at most 20
    throughput: list[Rate]
    tenants_with_ready: int  # how many tenants have ready tasks
    paused: list[TenantShares]  # the paused tenants, busy or not (Dashboard.paused_tenants)


@dataclass(frozen=True)
class TenantPage:
    """A page of the tenants with ready tasks, the busiest first; ``cursor`` asks for the
    next page (0: no more)."""

    tenants: list[TenantRow]
    cursor: int


@dataclass(frozen=True)
class TaskDetail:
    """A task (fair policy, ``task``) or a job (strict policy, ``job``)."""

    kind: str
    task: TaskInfo | None = None
    job: JobInfo | None = None
    # A job's kept outcome, read without taking it: its pusher still gets it, once.
    job_result: JobOutcome | None = None


@dataclass(frozen=True)
class QueueWorker:
    """A worker of the queue, one row: as it registered itself in the worker registry, and
    the tasks it holds leases on now. ``registered`` False: it holds leases but is not in
    the registry (a worker of a version before the registry, or one whose registration
    lapsed), so only its id and tasks are known."""

    worker_id: str
    registered: bool
    host: str | None
    pid: int | None
    functions: list[str]  # the task function names it serves
    concurrency: int | None
    seen_at: float | None  # its last heartbeat, epoch seconds (server clock)
    held: int  # tasks it holds leases on now
    task_ids: list[str]  # those tasks


@dataclass(frozen=True)
class Workers:
    """The queue's workers (live ones from the registry, idle ones too, and any other
    holding leases) and the HTTP workers registered with the master."""

    queue: list[QueueWorker]
    http: list[WorkerStatus]


def queue_workers(
    live: list[WorkerInfo], held: dict[str, list[str]], elsewhere: set[str]
) -> list[QueueWorker]:
    """The registry's workers with the leases each holds, then the holders of leases the
    registry lacks (but not those listed ``elsewhere``: the master's HTTP workers)."""
    rows = [
        QueueWorker(
            w.worker_id,
            True,
            w.host,
            w.pid,
            list(w.functions),
            w.concurrency,
            w.seen_at,
            len(held.get(w.worker_id, [])),
            held.get(w.worker_id, []),
        )
        for w in live
    ]
    registered = {w.worker_id for w in live}
    rows += [
        QueueWorker(worker, False, None, None, [], None, None, len(ids), ids)
        for worker, ids in held.items()
        if worker not in registered and worker not in elsewhere
    ]
    return sorted(rows, key=lambda row: row.worker_id)


@dataclass(frozen=True)
class ScheduleRow:
    """A schedule, flattened for a table."""

    schedule_id: str
    state: str
    cron: str | None
    interval: float | None
    timezone: str
    task_name: str
    user_id: str
    next_run: float | None
    last_run: float | None
    runs: int
    failures: int
    skipped: int
    last_task_id: str | None
    last_error: str | None


@dataclass(frozen=True)
class FairnessRow:
    """One of the busiest tenants of the window: its service, and its shares."""

    tenant: str
    starts: int
    share: float  # of all starts in the window (0..1)
    per_minute: float
    wait_p50: float | None  # seconds from ready to start (upper bucket edge)
    wait_p99: float | None
    starts_by_minute: list[int]  # one per minute of the window, oldest first
    weight: int
    concurrency: int
    rate: int
    period: float
    paused: bool
    running: int
    ready: int
    servable: bool


@dataclass(frozen=True)
class Fairness:
    """Who the queue served over the last minutes (``FairQueue.fairness``), for the page."""

    at: float  # server time, epoch seconds
    minutes: int
    starts: int
    per_minute: float
    wait_p50: float | None
    wait_p99: float | None
    other_starts: int
    history: list[MinuteFigures]
    tenants: list[FairnessRow]
    # The paused tenants: one that served nothing in the window is in no row above.
    paused: list[TenantShares]


def server_minutes(view: FairnessView | None) -> tuple[list[MinuteFigures], float]:
    """The server's minutes and its time, for the throughput chart's past."""
    return ([], 0.0) if view is None else (view.history, view.at)


def fairness_of(view: FairnessView, paused: list[TenantShares]) -> Fairness:
    rows = [
        FairnessRow(
            one.tenant,
            one.starts,
            one.share,
            one.per_minute,
            one.wait_p50,
            one.wait_p99,
            list(one.starts_by_minute),
            one.shares.weight,
            one.shares.concurrency,
            one.shares.rate,
            one.shares.period,
            one.shares.paused,
            one.shares.running,
            one.shares.ready,
            one.shares.servable,
        )
        for one in view.tenants
    ]
    return Fairness(
        view.at, view.minutes, view.starts, view.per_minute, view.wait_p50, view.wait_p99,
        view.other_starts, view.history, rows, paused,
    )  # fmt: skip


@dataclass(frozen=True)
class ShareFieldInfo:
    """One field of the tenant shares' table (``fairque/queue/shares.py``): the shares
    form is made of them."""

    name: str
    kind: str  # int, float or bool
    low: float | None
    high: float | None
    help: str


@dataclass(frozen=True)
class Access:
    """What the page learns before it asks for data: whether the data routes want a bearer
    token (without one there is nothing to sign in to, so no login form and no Log out),
    and the fields of a tenant's shares and of a task name's limits."""

    token_required: bool
    shares: list[ShareFieldInfo]
    limits: list[ShareFieldInfo]


@dataclass(frozen=True)
class Requeued:
    """How many failed tasks an action queued again."""

    requeued: int


@dataclass(frozen=True)
class ScheduleChangedState:
    """A schedule's state after pause or resume."""

    state: str


def schedule_row(info: ScheduleInfo) -> ScheduleRow:
    schedule = info.schedule
    return ScheduleRow(
        schedule_id=info.schedule_id,
        state=info.state.value,
        cron=schedule.cron,
        interval=schedule.interval,
        timezone=schedule.timezone,
        task_name=schedule.task.name,
        user_id=schedule.task.user_id,
        next_run=info.next_run,
        last_run=info.last_run,
        runs=info.runs,
        failures=info.failures,
        skipped=info.skipped,
        last_task_id=info.last_task_id,
        last_error=info.last_error,
    )


def detail_of(record: Record) -> TaskDetail:
    """A task or a job, as its record says (a storage task is refused, naming its reader)."""
    if record.kind is RecordKind.JOB:
        return TaskDetail("job", job=job_info(record), job_result=kept_outcome(record))
    return TaskDetail("task", task=task_info(record))


@dataclass
class Throughput:
    """Counter samples of the last minutes, kept in this process."""

    history: deque[tuple[float, int, int, int]] = field(default_factory=deque)

    def record(self, at: float, counters: dict[str, int], keep: int) -> None:
        sample = (
            at,
            counters.get("pushed", 0),
            counters.get("finished", 0),
            counters.get("failed", 0),
        )
        self.history.append(sample)
        while len(self.history) > keep:
            self.history.popleft()

    def rates(self, minutes: list[MinuteFigures] | None = None, now: float = 0.0) -> list[Rate]:
        """Rates between this process's samples, after the server's per-minute history
        of the whole minutes before them, so the chart has a past when the page opens
        (and, until two samples exist, the current minute so far, up to ``now``)."""
        samples = list(self.history)
        rates = []
        first_sample = samples[0][0] if samples else float("inf")
        for minute in minutes or []:
            counts = (minute.pushed, minute.finished, minute.failed)
            end = minute.at + 60
            if end <= first_sample:
                rates.append(Rate(end, *(n / 60 for n in counts)))
            elif len(samples) < 2 and minute.at < now < end:
                rates.append(Rate(now, *(n / (now - minute.at) for n in counts)))
        for (t0, *before), (t1, *after) in itertools.pairwise(samples):
            span = t1 - t0
            if span > 0:
                pushed, finished, failed = (
                    (b - a) / span for a, b in zip(before, after, strict=True)
                )
                rates.append(Rate(t1, max(pushed, 0.0), max(finished, 0.0), max(failed, 0.0)))
        return rates


def tenant_rows(tenants: dict[str, TenantStats], paused: Collection[str]) -> list[TenantRow]:
    rows = [
        TenantRow(user_id, **asdict(stats), paused=user_id in paused)
        for user_id, stats in tenants.items()
    ]
    return sorted(rows, key=lambda row: (-row.queued, row.user_id))
