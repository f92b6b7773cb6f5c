"""The Web UI: static pages at ``/ui`` and the data they read at ``/ui/api``.

The pages are plain HTML, CSS and JavaScript modules shipped in ``fairque/http/static``
(no build step). They fetch JSON from the routes here with the bearer token the login
form keeps, and refresh by polling. The same routes serve MessagePack, like the
master's. ``fairque master`` mounts them; ``fairque dashboard`` serves them alone.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import litestar
import msgspec
from litestar import Litestar, Response, Router
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.exceptions import NotFoundException
from litestar.params import Body, PathParameter, QueryParameter
from litestar.response import Redirect, ServerSentEvent, ServerSentEventMessage
from litestar.static_files import create_static_files_router

from fairque.config import QueueSettings, redis_url
from fairque.engine.calls import MAX_PAGE
from fairque.engine.executor import AsyncExecutor
from fairque.engine.outage import OUTAGE, OutageLog, server_label
from fairque.engine.records import (
    IDENTIFIER_PATTERN,
    MAX_ID_LENGTH,
    Record,
    RecordKind,
    TaskState,
)
from fairque.engine.waiting import wait_event
from fairque.errors import ScheduleNotFound, TaskNotFound
from fairque.http.health import health_routes
from fairque.http.protocol import Done, WorkerStatus
from fairque.http.wire import (
    EXCEPTION_HANDLERS,
    MSGPACK,
    PUBLIC,
    WireOperation,
    WireRequest,
    WireResponse,
    bearer_guard,
)
from fairque.jobs import AsyncJobQueue, ConstraintStatus, JobInfo
from fairque.jobs.ops import job_info
from fairque.queue import (
    AsyncQueue,
    FairnessView,
    LimitsPage,
    MinuteFigures,
    TaskInfo,
    TaskLimits,
    TaskPage,
    TenantShares,
    TenantStats,
    WorkerInfo,
)
from fairque.queue.async_client import open_async_queue
from fairque.queue.ops import task_info
from fairque.queue.shares import LIMITS, SHARES, ShareField, update_body
from fairque.runners.scheduler import AsyncTaskScheduler
from fairque.scheduler import ScheduleInfo

log = logging.getLogger("fairque.ui")
STATIC = Path(__file__).parent / "static"
# The page runs only its own script and style, talks only to its own origin, and cannot
# be framed: data shown in it can never become code.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
# The page, its files and /ui/api/access load before the login form: no token.
MAX_LEASE_HOLDERS = 1000  # started tasks read to count the leases each worker holds

get = partial(litestar.get, media_type=MSGPACK, operation_class=WireOperation, tags=["Web UI"])
post = partial(litestar.post, media_type=MSGPACK, operation_class=WireOperation, tags=["Web UI"])
put = partial(litestar.put, media_type=MSGPACK, operation_class=WireOperation, tags=["Web UI"])


@dataclass(frozen=True)
class UiConfig:
    """Where the UI reads from, and how much throughput history it keeps."""

    url: str | None = None
    namespace: str = "default"
    settings: QueueSettings | None = None  # written for the namespace at start, if given
    shards: int = 1  # a sharded queue's tasks are shown from all of its shards
    sample_every: float = 2.0  # seconds between throughput samples
    history: float = 600.0  # seconds of samples kept


@dataclass(frozen=True)
class Rate:
    """Tasks per second between two samples, ending at ``at`` (epoch seconds)."""

    at: float
    pushed: float
    finished: float
    failed: float


@dataclass(frozen=True)
class TenantRow:
    """A tenant's ready backlog and lifetime counters."""

    user_id: str
    queued: int
    pushed: int
    finished: int
    failed: int
    retried: int
    requeued: int
    canceled: int
    expired: int


@dataclass(frozen=True)
class UiOverview:
    """Everything the overview page shows."""

    namespace: str
    states: dict[str, int]
    counters: dict[str, int]
    tenants: list[TenantRow]  # the busiest (most ready tasks first), at most 20
    throughput: list[Rate]
    tenants_with_ready: int  # how many tenants have ready tasks


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


def _queue_workers(
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


def _minutes(view: FairnessView | None) -> tuple[list[MinuteFigures], float]:
    """The server's minutes and its time, for the throughput chart's past."""
    return ([], 0.0) if view is None else (view.history, view.at)


def _fairness(view: FairnessView) -> Fairness:
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
        view.other_starts, view.history, rows,
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


def _schedule_row(info: ScheduleInfo) -> ScheduleRow:
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


def _detail(record: Record) -> TaskDetail:
    """A task or a job, as its record says (a storage task is refused, naming its reader)."""
    if record.kind is RecordKind.JOB:
        return TaskDetail("job", job=job_info(record))
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


class Dashboard:
    """The state behind the UI routes: clients of one namespace and the samples."""

    def __init__(
        self,
        config: UiConfig,
        http_workers: Callable[[], list[WorkerStatus]] | None = None,
        executor: Callable[[], AsyncExecutor] | None = None,
        outage: OutageLog | None = None,
        *,
        token_required: bool = False,
    ) -> None:
        self.config = config
        self.token_required = token_required  # the app guards the data routes with a token
        self.http_workers = http_workers or list
        self.throughput = Throughput()
        # Shared with the master when it mounts the UI: one log line per outage in all.
        self.outage = outage or OutageLog(log, "of the queue", "answering 503 until it is back")
        self._shared_executor = executor  # the master's, when it mounts the UI
        self._executor: AsyncExecutor | None = None
        self._queue: AsyncQueue | None = None
        self._jobs: AsyncJobQueue | None = None
        self._scheduler: AsyncTaskScheduler | None = None
        self.stopping = asyncio.Event()  # set when the app stops: streams end

    @property
    def queue(self) -> AsyncQueue:
        assert self._queue is not None, "the dashboard has not started"
        return self._queue

    @property
    def jobs(self) -> AsyncJobQueue:
        assert self._jobs is not None, "the dashboard has not started"
        return self._jobs

    @property
    def scheduler(self) -> AsyncTaskScheduler:
        assert self._scheduler is not None, "the dashboard has not started"
        return self._scheduler

    async def ping(self) -> None:
        """Returns once the queue's server answers (the dashboard's readiness)."""
        assert self._executor is not None, "the dashboard has not started"
        await self._executor.ping()

    async def sample(self) -> None:
        """Records the counters now."""
        stats = await self.queue.stats()
        keep = int(self.config.history / self.config.sample_every) + 1
        self.throughput.record(time.time(), stats.counters, keep)

    async def _sample_until(self, stopping: asyncio.Event) -> None:
        # Stopped by the event, never cancelled mid-command: a cancelled redis-py call
        # may surface as a connection error instead of CancelledError.
        while not stopping.is_set():
            try:
                await self.sample()
                self.outage.answered()
            except OUTAGE as exc:  # the server is away: a gap in the chart
                self.outage.failed(exc)
            await wait_event(stopping, self.config.sample_every)

    @asynccontextmanager
    async def running(self, _app: Litestar) -> AsyncIterator[None]:
        """Connects and samples throughput for the lifetime of the app."""
        config = self.config
        shared = self._shared_executor
        if shared is not None:
            executor = shared()
        else:
            url = redis_url(config.url)
            self.outage.server = server_label(url)
            executor = AsyncExecutor.connect(url)
        self._executor = executor
        name, settings = config.namespace, config.settings
        self._queue = open_async_queue(
            None, name, config.shards, settings=settings, executor=executor
        )
        self._jobs = AsyncJobQueue(namespace=name, shards=config.shards, executor=executor)
        self._scheduler = AsyncTaskScheduler(namespace=name, executor=executor)
        self.stopping = stopping = asyncio.Event()
        sampling = asyncio.create_task(self._sample_until(stopping))
        try:
            yield
        finally:
            stopping.set()
            await sampling
            if shared is None:
                await executor.close()

    def router(self) -> Router:
        """The page, its files, and the data routes."""
        api = Router(
            "/ui/api",
            route_handlers=ROUTES,
            dependencies={"ui": Provide(lambda: self, use_cache=True, sync_to_thread=False)},
            response_class=WireResponse,
        )
        files = create_static_files_router(
            "/ui/static", [STATIC], opt=PUBLIC, name="ui-static", after_request=_secured
        )
        return Router("/", route_handlers=[page, api, files], response_headers=SECURITY_HEADERS)


async def _secured(response: Response[Any]) -> Response[Any]:
    """The page's files get its headers too (the router's do not reach them)."""
    response.headers.update(SECURITY_HEADERS)
    return response


@litestar.get(["/ui", "/ui/"], opt=PUBLIC, include_in_schema=False, media_type="text/html")
async def page() -> Response[bytes]:
    return Response((STATIC / "index.html").read_bytes(), media_type="text/html")


# What the engine admits as a tenant or a name (records.check_identifier).
IDENTIFIER = QueryParameter(min_length=1, max_length=MAX_ID_LENGTH, pattern=IDENTIFIER_PATTERN)
UserId = Annotated[
    str,
    PathParameter(
        min_length=1, max_length=MAX_ID_LENGTH, pattern=IDENTIFIER_PATTERN, description="A tenant."
    ),
]
TaskId = Annotated[str, PathParameter(min_length=1, max_length=256, description="A task id.")]
TaskName = Annotated[
    str,
    PathParameter(
        min_length=1, max_length=MAX_ID_LENGTH, pattern=IDENTIFIER_PATTERN,
        description="A task name (its function's).",
    ),
]  # fmt: skip
ScheduleId = Annotated[str, PathParameter(min_length=1, max_length=256)]


def _tenant_rows(tenants: dict[str, TenantStats]) -> list[TenantRow]:
    rows = [TenantRow(user_id, **asdict(stats)) for user_id, stats in tenants.items()]
    return sorted(rows, key=lambda row: (-row.queued, row.user_id))


@get(
    "/access",
    opt=PUBLIC,
    security=[{}],  # answered without a token, even when the others need one
    summary="Whether the data routes need a bearer token (asked without one)",
)
async def access(ui: NamedDependency[Dashboard]) -> Access:
    def info(fields: Sequence[ShareField]) -> list[ShareFieldInfo]:
        return [ShareFieldInfo(f.name, f.kind.__name__, f.low, f.high, f.help) for f in fields]

    return Access(ui.token_required, info(SHARES), info(LIMITS))


@get("/overview", summary="Tasks per state, counters, tenants and throughput")
async def overview(ui: NamedDependency[Dashboard]) -> UiOverview:
    stats = await ui.queue.stats(fairness_top=0)  # polled: the minutes' figures alone
    states = {state.value: count for state, count in stats.states.items()}
    return UiOverview(
        ui.config.namespace,
        states,
        stats.counters,
        _tenant_rows(stats.tenants),
        ui.throughput.rates(*_minutes(stats.fairness)),
        stats.tenants_with_ready,
    )


@get("/tenants", summary="A page of the tenants with ready tasks: backlog and counters")
async def tenants(
    ui: NamedDependency[Dashboard],
    *,
    cursor: Annotated[int, QueryParameter(ge=0, le=2**53 - 1)] = 0,
    limit: Annotated[int, QueryParameter(ge=1, le=MAX_PAGE)] = 50,
) -> TenantPage:
    page = await ui.queue.busiest_tenants(cursor, limit)
    return TenantPage(_tenant_rows(page.tenants), page.cursor)


@get("/tenants/{user_id:str}", summary="A tenant's ready backlog and lifetime counters")
async def tenant_figures(ui: NamedDependency[Dashboard], user_id: UserId) -> TenantRow:
    return _tenant_rows({user_id: await ui.queue.tenant_stats(user_id)})[0]


@get("/tasks", summary="A page of the tasks and jobs in a state, of a tenant and / or name")
async def task_list(
    ui: NamedDependency[Dashboard],
    *,
    task_state: Annotated[TaskState, QueryParameter(name="state")] = TaskState.QUEUED,
    user_id: Annotated[str | None, IDENTIFIER] = None,
    name: Annotated[str | None, IDENTIFIER] = None,
    cursor: Annotated[int, QueryParameter(ge=0, le=2**53 - 1)] = 0,
    limit: Annotated[int, QueryParameter(ge=1, le=MAX_PAGE)] = 50,
) -> TaskPage:
    return await ui.queue.tasks(task_state, user_id, name, cursor, limit)


@get("/tasks/{task_id:str}", summary="A task or job: payload, attempts, lease, dependencies")
async def task_detail(ui: NamedDependency[Dashboard], task_id: TaskId) -> TaskDetail:
    record = await ui.queue.get_record(task_id)
    if record is None:
        raise TaskNotFound(task_id)
    return _detail(record)


@post("/tasks/{task_id:str}/retry", status_code=200, summary="Queue a failed task again")
async def retry_task(ui: NamedDependency[Dashboard], task_id: TaskId) -> Done:
    return Done(await ui.queue.retry(task_id))


@post(
    "/tasks/{task_id:str}/cancel",
    status_code=200,
    summary="Cancel a task that has not ended; its worker stops a running one",
)
async def cancel_task(ui: NamedDependency[Dashboard], task_id: TaskId) -> Done:
    return Done(await ui.queue.cancel(task_id))


@post(
    "/tenants/{user_id:str}/retry-failed",
    status_code=200,
    summary="Requeue a tenant's failed tasks",
)
async def retry_tenant(ui: NamedDependency[Dashboard], user_id: UserId) -> Requeued:
    return Requeued(await ui.queue.retry_failed(user_id))


Minutes = Annotated[int, QueryParameter(ge=1, le=10, description="The window, in minutes.")]
Top = Annotated[int, QueryParameter(ge=1, le=100, description="How many of the busiest tenants.")]


if TYPE_CHECKING:
    SharesUpdate = msgspec.Struct
else:  # the fields, their kinds and bounds: fairque/queue/shares.py's table
    SharesUpdate = update_body()
    SharesUpdate.__doc__ = """A change to a tenant's shares (``FairQueue.set_tenant``); a field
    left out keeps its value. ``rate`` starts per ``period`` seconds (1 s until set); 0 lifts
    a limit."""


SharesBody = Annotated[SharesUpdate, Body(media_type=MSGPACK, description="Fields to change.")]

if TYPE_CHECKING:
    LimitsUpdate = msgspec.Struct
else:  # the same table, but the weight
    LimitsUpdate = update_body(LIMITS, "LimitsUpdate")
    LimitsUpdate.__doc__ = """A change to a task name's limits (``FairQueue.set_limits``); a
    field left out keeps its value. ``rate`` starts per ``period`` seconds (1 s until set); 0
    lifts a limit."""

LimitsBody = Annotated[LimitsUpdate, Body(media_type=MSGPACK, description="Fields to change.")]


@get("/fairness", summary="Who was served: shares of service, waits, the busiest tenants")
async def fairness(ui: NamedDependency[Dashboard], minutes: Minutes = 5, top: Top = 20) -> Fairness:
    return _fairness(await ui.queue.fairness(minutes, top))


@litestar.get("/fairness/stream", include_in_schema=False)
async def fairness_stream(
    ui: NamedDependency[Dashboard], minutes: Minutes = 5, top: Top = 20
) -> ServerSentEvent:
    """The fairness view as server-sent events (``event: fairness``, JSON data), one
    every ``sample_every`` seconds until the client goes or the app stops; an outage is
    an ``event: outage`` and the stream goes on. Left out of the OpenAPI document: a
    stream has no end for a fuzzer to wait for."""

    async def events() -> AsyncIterator[ServerSentEventMessage]:
        while not ui.stopping.is_set():
            try:
                view = _fairness(await ui.queue.fairness(minutes, top))
                yield ServerSentEventMessage(msgspec.json.encode(view).decode(), event="fairness")
            except OUTAGE as exc:
                yield ServerSentEventMessage(str(exc), event="outage")
            try:
                await wait_event(ui.stopping, ui.config.sample_every)
            except asyncio.CancelledError:
                # The server stops while a page still listens (uvicorn cancels open
                # responses before the app's shutdown): the stream ends, as a stream may.
                return

    return ServerSentEvent(events())


@get("/tenants/{user_id:str}/shares", summary="A tenant's shares and where it stands")
async def tenant_shares(ui: NamedDependency[Dashboard], user_id: UserId) -> TenantShares:
    return await ui.queue.tenant(user_id)


@put("/tenants/{user_id:str}/shares", summary="Change a tenant's weight, limits or pause")
async def set_tenant_shares(
    ui: NamedDependency[Dashboard], user_id: UserId, data: SharesBody
) -> TenantShares:
    return await ui.queue.set_tenant(user_id, **msgspec.structs.asdict(data))


@get("/limits", summary="A page of the task names with limits")
async def names_with_limits(
    ui: NamedDependency[Dashboard],
    *,
    cursor: Annotated[int, QueryParameter(ge=0, le=2**53 - 1)] = 0,
    limit: Annotated[int, QueryParameter(ge=1, le=MAX_PAGE)] = 100,
) -> LimitsPage:
    return await ui.queue.names_with_limits(cursor, limit)


@get("/names/{name:str}/limits", summary="A task name's limits and its tasks running")
async def name_limits(ui: NamedDependency[Dashboard], name: TaskName) -> TaskLimits:
    return await ui.queue.limits(name)


@put("/names/{name:str}/limits", summary="Change a task name's limits or pause, for all workers")
async def set_name_limits(
    ui: NamedDependency[Dashboard], name: TaskName, data: LimitsBody
) -> TaskLimits:
    return await ui.queue.set_limits(name, **msgspec.structs.asdict(data))


@get("/workers", summary="Workers of the queue (registered or holding leases) and HTTP workers")
async def workers(ui: NamedDependency[Dashboard]) -> Workers:
    started = await ui.queue.tasks(TaskState.STARTED, limit=MAX_LEASE_HOLDERS)
    held: dict[str, list[str]] = {}
    for task in started.tasks:
        held.setdefault(task.worker_id or "?", []).append(task.task_id)
    http = ui.http_workers()
    live = await ui.queue.workers()
    return Workers(_queue_workers(live, held, {w.id for w in http}), http)


@get("/schedules", summary="Schedules: state, next and last run, failures")
async def schedules(ui: NamedDependency[Dashboard]) -> list[ScheduleRow]:
    return [_schedule_row(info) for info in await ui.scheduler.list_schedules()]


async def _change_schedule(action: Callable[[str], Any], schedule_id: str) -> ScheduleChangedState:
    try:
        state = await action(schedule_id)
    except ScheduleNotFound:
        raise NotFoundException(f"no schedule {schedule_id!r}") from None
    return ScheduleChangedState(state.value)


@post("/schedules/{schedule_id:str}/pause", status_code=200, summary="Pause a schedule")
async def pause_schedule(
    ui: NamedDependency[Dashboard], schedule_id: ScheduleId
) -> ScheduleChangedState:
    return await _change_schedule(ui.scheduler.pause_schedule, schedule_id)


@post("/schedules/{schedule_id:str}/resume", status_code=200, summary="Resume a schedule")
async def resume_schedule(
    ui: NamedDependency[Dashboard], schedule_id: ScheduleId
) -> ScheduleChangedState:
    return await _change_schedule(ui.scheduler.resume_schedule, schedule_id)


@get("/constraints", summary="Constraints and how much of each is in use")
async def constraints(ui: NamedDependency[Dashboard]) -> list[ConstraintStatus]:
    return await ui.jobs.constraints()


ROUTES = [
    access,
    overview,
    tenants,
    tenant_figures,
    task_list,
    task_detail,
    retry_task,
    cancel_task,
    retry_tenant,
    fairness,
    fairness_stream,
    tenant_shares,
    set_tenant_shares,
    names_with_limits,
    name_limits,
    set_name_limits,
    workers,
    schedules,
    pause_schedule,
    resume_schedule,
    constraints,
]


@dataclass(frozen=True)
class DashboardConfig:
    """``fairque dashboard``: the UI alone, on a Redis / Valkey URL."""

    ui: UiConfig = UiConfig()
    token: str | None = None  # required as ``Authorization: Bearer`` when set


@litestar.get("/", opt=PUBLIC, include_in_schema=False)
async def to_ui() -> Redirect:
    return Redirect("/ui")


def create_dashboard(config: DashboardConfig | None = None) -> Litestar:
    """The Web UI and its data routes, without the master's job API and dispatcher."""
    config = config or DashboardConfig()
    dashboard = Dashboard(config.ui, token_required=bool(config.token))
    return Litestar(
        route_handlers=[to_ui, dashboard.router(), *health_routes(dashboard.ping)],
        request_class=WireRequest,
        exception_handlers=EXCEPTION_HANDLERS,
        guards=[bearer_guard(config.token)] if config.token else [],
        lifespan=[dashboard.running],
        state=State({"outage": dashboard.outage}),
        openapi_config=None,
        debug=False,
    )
