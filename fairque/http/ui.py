"""The Web UI: static pages at ``/ui`` and the data they read at ``/ui/api``.

The pages are plain HTML, CSS and JavaScript modules shipped in ``fairque/http/static``
(no build step). They fetch JSON from the routes here with the bearer token the login
form keeps, and refresh by polling. The same routes serve MessagePack, like the
master's. ``fairque master`` mounts them; ``fairque dashboard`` serves them alone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

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
from fairque.engine.async_executor import AsyncExecutor
from fairque.engine.calls import MAX_PAGE
from fairque.engine.fields import LIMITS, SHARES, ShareField
from fairque.engine.outage import OUTAGE, OutageLog, server_label
from fairque.engine.records import (
    IDENTIFIER_PATTERN,
    MAX_ID_LENGTH,
    TaskState,
)
from fairque.engine.waiting import wait_event
from fairque.errors import ScheduleNotFound, TaskNotFound
from fairque.http.health import health_routes
from fairque.http.protocol import Done, WorkerStatus
from fairque.http.ui_bodies import (
    Access,
    Fairness,
    Requeued,
    ScheduleChangedState,
    ScheduleRow,
    ShareFieldInfo,
    TaskDetail,
    TenantPage,
    TenantRow,
    Throughput,
    UiOverview,
    Workers,
    detail_of,
    fairness_of,
    queue_workers,
    schedule_row,
    server_minutes,
    tenant_rows,
)
from fairque.http.wire import (
    EXCEPTION_HANDLERS,
    MSGPACK,
    PUBLIC,
    WireOperation,
    WireRequest,
    WireResponse,
    bearer_guard,
)
from fairque.jobs import AsyncJobQueue, ConstraintStatus
from fairque.queue import (
    AsyncQueue,
    LimitsPage,
    TaskLimits,
    TaskPage,
    TenantShares,
)
from fairque.queue.async_client import open_async_queue
from fairque.queue.calls.bulk import BULK_BATCH, CURSOR_PATTERN, MAX_BULK_BATCH
from fairque.queue.models import MAX_BULK_AGE, BulkAction, BulkBatch, Selector
from fairque.queue.shares import update_body
from fairque.runners.scheduler import AsyncTaskScheduler

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
# Tenants with shares read per refresh to find the paused ones (pausing is a share); past
# that many, a paused tenant may go unlisted.
MAX_SHARES_READ = 1000
SHARES_PAGE = 100  # a script call each: short ones, not one long one that holds the server

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

    async def paused_tenants(self) -> list[TenantShares]:
        """The paused tenants, among the first MAX_SHARES_READ tenants with shares. The
        pages name them: one that has served no task lately is in no other list."""
        paused: list[TenantShares] = []
        cursor = read = 0
        while True:
            page = await self.queue.tenants_with_shares(cursor, SHARES_PAGE)
            paused += [shares for shares in page.tenants if shares.paused]
            read += len(page.tenants)
            cursor = page.cursor
            if not cursor or read >= MAX_SHARES_READ:
                return paused

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
    paused = await ui.paused_tenants()
    states = {state.value: count for state, count in stats.states.items()}
    return UiOverview(
        ui.config.namespace,
        states,
        stats.counters,
        tenant_rows(stats.tenants, {shares.tenant for shares in paused}),
        ui.throughput.rates(*server_minutes(stats.fairness)),
        stats.tenants_with_ready,
        paused,
    )


@get("/tenants", summary="A page of the tenants with ready tasks: backlog and counters")
async def tenants(
    ui: NamedDependency[Dashboard],
    *,
    cursor: Annotated[int, QueryParameter(ge=0, le=2**53 - 1)] = 0,
    limit: Annotated[int, QueryParameter(ge=1, le=MAX_PAGE)] = 50,
) -> TenantPage:
    page = await ui.queue.busiest_tenants(cursor, limit)
    paused = {shares.tenant for shares in await ui.paused_tenants()}
    return TenantPage(tenant_rows(page.tenants, paused), page.cursor)


@get("/tenants/{user_id:str}", summary="A tenant's ready backlog and lifetime counters")
async def tenant_figures(ui: NamedDependency[Dashboard], user_id: UserId) -> TenantRow:
    paused = {user_id} if (await ui.queue.tenant(user_id)).paused else set()
    return tenant_rows({user_id: await ui.queue.tenant_stats(user_id)}, paused)[0]


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
    return detail_of(record)


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


Identifier = Annotated[
    str, msgspec.Meta(min_length=1, max_length=MAX_ID_LENGTH, pattern=IDENTIFIER_PATTERN)
]


class BulkRetry(msgspec.Struct, forbid_unknown_fields=True):
    """Which tasks a bulk operation selects (``FairQueue.bulk``'s ``Selector``): of a
    tenant, of a task name, that ended (waiting ones: were pushed) at least
    ``older_than`` seconds before the operation began. ``cursor`` is where it goes on, as
    the last batch answered it ('' first); with ``dry_run`` it only counts."""

    user_id: Identifier | None = None
    name: Identifier | None = None
    older_than: Annotated[float, msgspec.Meta(ge=0, le=MAX_BULK_AGE)] = 0.0
    cursor: Annotated[str, msgspec.Meta(pattern=CURSOR_PATTERN)] = ""
    dry_run: bool = False
    batch: Annotated[int, msgspec.Meta(ge=1, le=MAX_BULK_BATCH)] = BULK_BATCH


class BulkCancel(BulkRetry, forbid_unknown_fields=True):
    """A bulk cancel's selection: of one waiting state, or of all (queued tasks only with
    a ``user_id``: they are kept per tenant)."""

    state: Literal["scheduled", "deferred"] | None = None


class BulkDelete(BulkRetry, forbid_unknown_fields=True):
    """A bulk delete's selection: of one ended state, or of all."""

    state: Literal["finished", "failed", "canceled"] | None = None


def _selector(data: BulkRetry, state: str | None = None) -> Selector:
    return Selector(
        None if state is None else TaskState(state), data.user_id, data.name, data.older_than
    )


bulk_post = partial(
    post,
    status_code=200,
    description="Send the cursor each answer holds until it is null: each batch holds the "
    "server a few milliseconds at most. A dry run counts the tasks the operation selects.",
)


@bulk_post("/bulk/retry", summary="One batch of a bulk retry of failed tasks")
async def bulk_retry(
    ui: NamedDependency[Dashboard], data: Annotated[BulkRetry, Body(media_type=MSGPACK)]
) -> BulkBatch:
    return await ui.queue.bulk(
        BulkAction.RETRY, _selector(data), data.cursor, dry_run=data.dry_run, batch=data.batch
    )


@bulk_post(
    "/bulk/cancel", summary="One batch of a bulk cancel of waiting tasks (and of their dependents)"
)
async def bulk_cancel(
    ui: NamedDependency[Dashboard], data: Annotated[BulkCancel, Body(media_type=MSGPACK)]
) -> BulkBatch:
    selector = _selector(data, data.state)
    return await ui.queue.bulk(
        BulkAction.CANCEL, selector, data.cursor, dry_run=data.dry_run, batch=data.batch
    )


@bulk_post("/bulk/delete", summary="One batch of a bulk delete of ended tasks")
async def bulk_delete(
    ui: NamedDependency[Dashboard], data: Annotated[BulkDelete, Body(media_type=MSGPACK)]
) -> BulkBatch:
    selector = _selector(data, data.state)
    return await ui.queue.bulk(
        BulkAction.DELETE, selector, data.cursor, dry_run=data.dry_run, batch=data.batch
    )


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
    return fairness_of(await ui.queue.fairness(minutes, top), await ui.paused_tenants())


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
                view = fairness_of(await ui.queue.fairness(minutes, top), await ui.paused_tenants())
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
    return Workers(queue_workers(live, held, {w.id for w in http}), http)


@get("/schedules", summary="Schedules: state, next and last run, failures")
async def schedules(ui: NamedDependency[Dashboard]) -> list[ScheduleRow]:
    return [schedule_row(info) for info in await ui.scheduler.list_schedules()]


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
    bulk_retry,
    bulk_cancel,
    bulk_delete,
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
