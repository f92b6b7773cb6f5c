"""The JQ master: an ASGI app for pushers, workers and a Web UI.

Run it with ``fairque master``, or serve :func:`create_master` with any ASGI server.
Bodies are JSON or MessagePack (see :data:`~fairque.http.wire.MEDIA_TYPES`); the OpenAPI
document is served at ``/schema/openapi.json`` and committed as ``docs/openapi.json``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any

import litestar
from litestar import Litestar, Request, Router
from litestar.di import NamedDependency, Provide
from litestar.params import Body, PathParameter, QueryParameter

from fairque.config import QueueSettings, redis_url
from fairque.engine.async_executor import AsyncExecutor
from fairque.engine.batching import Batcher
from fairque.engine.eviction import async_eviction_warning
from fairque.engine.outage import OUTAGE, OutageLog, server_label
from fairque.engine.records import IDENTIFIER_PATTERN, MAX_ID_LENGTH
from fairque.engine.waiting import wait_event
from fairque.errors import InvalidInput, TaskNotFound
from fairque.http.app import create_app
from fairque.http.health import health_routes
from fairque.http.metrics import MasterMetrics
from fairque.http.openapi import Document
from fairque.http.protocol import (
    ConstraintSaved,
    Done,
    JobCreated,
    JobReport,
    JobsCreated,
    Overview,
    Reported,
    WorkerAck,
    WorkerRegistration,
    WorkerStatus,
)
from fairque.http.ui import (
    BulkCancel,
    BulkDelete,
    BulkRetry,
    Dashboard,
    LimitsUpdate,
    SharesUpdate,
    UiConfig,
)
from fairque.http.wire import MEDIA_TYPES, MSGPACK, WireOperation, request_media_type
from fairque.http.worker import worker_api
from fairque.jobs import (
    Constraint,
    ConstraintStatus,
    Failure,
    Job,
    JobInfo,
    JobOutcome,
    JobPage,
    Success,
)
from fairque.jobs.async_client import LEASE_GRACE, RESULT_TTL, AsyncJobQueue
from fairque.jobs.batching import pushes
from fairque.jobs.models import VALUE_SCHEMA, JobState, validate
from fairque.queue.async_client import AsyncQueue, open_async_queue
from fairque.queue.calls.maintenance import MAINTENANCE_INTERVAL, MAINTENANCE_ROUNDS
from fairque.runners.dispatcher import Dispatcher

log = logging.getLogger("fairque.master")

# Every route speaks MessagePack, and its OpenAPI operation offers JSON too.
get = partial(litestar.get, media_type=MSGPACK, operation_class=WireOperation)
post = partial(litestar.post, media_type=MSGPACK, operation_class=WireOperation)
put = partial(litestar.put, media_type=MSGPACK, operation_class=WireOperation)
delete = partial(litestar.delete, media_type=MSGPACK, operation_class=WireOperation)

MAX_PAGE = 1000
MAX_BATCH = 1000
MAX_CURSOR = 2**53 - 1  # cursors are positions the scripts count in Lua numbers


@dataclass(frozen=True)
class MasterConfig:
    """How a master runs. ``token``: required as ``Authorization: Bearer`` when set."""

    url: str | None = None  # Redis / Valkey; None: $FAIRQUE_REDIS_URL or the embedded one
    namespace: str = "default"
    shards: int = 1  # > 1: jobs split over that many namespaces by name (fairque.jobs.plans)
    token: str | None = None
    settings: QueueSettings | None = None  # written for the namespace at start, if given
    result_ttl: float = RESULT_TTL  # seconds a kept result waits to be read
    lease_grace: float = LEASE_GRACE  # seconds a lease outlives the job's timeout
    heartbeat: float = 5.0  # seconds between worker heartbeats
    poll: float = 0.5  # seconds between dispatch rounds when nothing wakes it
    max_body: int = 2 * 1024 * 1024  # bytes; larger requests get 413


class Master:
    """The state behind the routes: the queue clients and the dispatcher."""

    def __init__(self, config: MasterConfig) -> None:
        self.config = config
        # The server is named once it is known (an unset URL may mean the embedded one).
        meanwhile = "answering 503 to what needs it until it is back"
        self.outage = OutageLog(log, "of the queue", meanwhile)
        self._executor: AsyncExecutor | None = None
        self._queue: AsyncQueue | None = None
        self._jobs: AsyncJobQueue | None = None
        self._dispatcher: Dispatcher | None = None
        self._pushes: Batcher[Job, str] | None = None

    @property
    def executor(self) -> AsyncExecutor:
        """The one connection pool of the master, its jobs and its Web UI."""
        assert self._executor is not None, "the master has not started"
        return self._executor

    @property
    def queue(self) -> AsyncQueue:
        assert self._queue is not None, "the master has not started"
        return self._queue

    @property
    def jobs(self) -> AsyncJobQueue:
        assert self._jobs is not None, "the master has not started"
        return self._jobs

    @property
    def pushes(self) -> Batcher[Job, str]:
        """Single pushes, sent together when they arrive together."""
        assert self._pushes is not None, "the master has not started"
        return self._pushes

    @property
    def dispatcher(self) -> Dispatcher:
        assert self._dispatcher is not None, "the master has not started"
        return self._dispatcher

    @asynccontextmanager
    async def running(self, _app: Litestar) -> AsyncIterator[None]:
        """Connects and dispatches for the lifetime of the app."""
        config = self.config
        url = redis_url(config.url)
        self.outage.server = server_label(url)
        self._executor = executor = AsyncExecutor.connect(url)
        try:  # say at once whether the server is there; the routes answer 503 until it is
            await executor.ping()
            log.info("the master uses %s, namespace %s", self.outage.server, config.namespace)
            if warning := await async_eviction_warning(executor.client):
                log.warning("%s", warning)
        except OUTAGE as exc:
            self.outage.failed(exc)
        self._queue = open_async_queue(
            None, config.namespace, config.shards, settings=config.settings, executor=executor
        )
        self._jobs = AsyncJobQueue(
            namespace=config.namespace,
            shards=config.shards,
            executor=executor,
            result_ttl=config.result_ttl,
            lease_grace=config.lease_grace,
        )
        with contextlib.suppress(*OUTAGE):  # the first call: a newer data format ends it here
            await self._queue.namespace_settings()
        self._pushes = pushes(self._jobs)
        self._dispatcher = Dispatcher(
            self._jobs, config.heartbeat, config.poll, config.token, self.outage
        )
        dispatching = asyncio.create_task(self._dispatcher.run())
        stopping = asyncio.Event()
        maintaining = asyncio.create_task(self._maintain(stopping))
        try:
            yield
        finally:
            stopping.set()
            self._dispatcher.stop()
            await dispatching
            await maintaining
            await self._dispatcher.close()
            await self._queue.close()  # answers the pushes in flight; the pool stays open
            await executor.close()

    async def state_counts(self) -> dict[str, int]:
        """Jobs per state, as the overview counts them (no per-tenant fairness)."""
        stats = await self.queue.stats(fairness_top=0)
        return {state.value: count for state, count in stats.states.items()}

    def registered_workers(self) -> int:
        return len(self.dispatcher.workers)

    async def _maintain(self, stopping: asyncio.Event) -> None:
        """Tidies the namespace while the master runs (one round per interval, shared with
        every other process that does so)."""
        while not await wait_event(stopping, MAINTENANCE_INTERVAL):
            await self._maintain_once()

    async def _maintain_once(self) -> None:
        try:
            done = await self.queue.maintain(MAINTENANCE_INTERVAL)
            for _ in range(MAINTENANCE_ROUNDS):  # a round that hit its bound: the next is due now
                if not done.more:
                    break
                done = await self.queue.maintain(MAINTENANCE_INTERVAL)
        except OUTAGE as exc:  # said once per outage, with the routes' 503s
            self.outage.failed(exc)


JobBody = Annotated[Job, Body(media_type=MSGPACK, description="The job to enqueue.")]
JobId = Annotated[str, PathParameter(max_length=256, description="A job id.")]


@post("/jobs", status_code=201, summary="Enqueue a job; returns its id")
async def enqueue(master: NamedDependency[Master], data: JobBody) -> JobCreated:
    created = JobCreated(await master.pushes(data))
    master.dispatcher.wake.set()
    return created


JobsBody = Annotated[
    list[Job],
    Body(
        media_type=MSGPACK,
        description="Jobs to enqueue together, all or none.",
        min_items=1,
        max_items=MAX_BATCH,
    ),
]


@post("/jobs/batch", status_code=201, summary="Enqueue up to 1,000 jobs atomically")
async def enqueue_many(master: NamedDependency[Master], data: JobsBody) -> JobsCreated:
    if not 1 <= len(data) <= MAX_BATCH:
        raise InvalidInput("body", f"send 1 to {MAX_BATCH} jobs, got {len(data)}")
    created = JobsCreated(await master.jobs.push_many(data))
    master.dispatcher.wake.set()
    return created


@get("/jobs", summary="List jobs by state (and name), a page at a time")
async def list_jobs(
    master: NamedDependency[Master],
    job_state: Annotated[JobState, QueryParameter(name="state")] = "queued",
    name: Annotated[
        str | None,
        QueryParameter(min_length=1, max_length=MAX_ID_LENGTH, pattern=IDENTIFIER_PATTERN),
    ] = None,
    cursor: Annotated[int, QueryParameter(ge=0, le=MAX_CURSOR)] = 0,
    limit: Annotated[int, QueryParameter(ge=1, le=MAX_PAGE)] = 50,
) -> JobPage:
    return await master.jobs.jobs(job_state, name, cursor, limit)


@get("/jobs/{job_id:str}", summary="A job's attributes and state")
async def job_detail(master: NamedDependency[Master], job_id: JobId) -> JobInfo:
    info = await master.jobs.get(job_id)
    if info is None:
        raise TaskNotFound(job_id)
    return info


@get(
    "/jobs/{job_id:str}/result",
    summary="The result object, once; null afterwards (404: no such job, as its detail)",
)
async def job_result(master: NamedDependency[Master], job_id: JobId) -> JobOutcome | None:
    result = await master.jobs.result(job_id)
    if result is None:
        if await master.jobs.get(job_id) is None:
            raise TaskNotFound(job_id)
        return None
    outcome: JobOutcome = validate(result, JobOutcome)  # type: ignore[arg-type]
    return outcome


@post("/jobs/{job_id:str}/cancel", status_code=200, summary="Cancel a job that has not started")
async def cancel_job(master: NamedDependency[Master], job_id: JobId) -> Done:
    return Done(await master.jobs.cancel(job_id))


@post("/jobs/{job_id:str}/retry", status_code=200, summary="Queue a failed job again")
async def retry_job(master: NamedDependency[Master], job_id: JobId) -> Done:
    retried = await master.jobs.retry(job_id)
    master.dispatcher.wake.set()
    return Done(retried)


ReportBody = Annotated[JobReport, Body(media_type=MSGPACK)]


@post(
    "/jobs/{job_id:str}/report",
    status_code=200,
    summary="Record a running job's progress and log lines (its worker's lease token)",
)
async def report_job(master: NamedDependency[Master], job_id: JobId, data: ReportBody) -> Reported:
    return Reported(
        await master.jobs.report(job_id, data.lease_token, data.progress, data.message, data.lines)
    )


WorkerId = Annotated[str, PathParameter(pattern=r"^[A-Za-z0-9_.:-]{1,128}$")]
RegistrationBody = Annotated[WorkerRegistration, Body(media_type=MSGPACK)]


@put("/workers/{worker_id:str}", summary="Register a worker, or heartbeat")
async def register_worker(
    master: NamedDependency[Master],
    worker_id: WorkerId,
    data: RegistrationBody,
    request: Request[Any, Any, Any],
) -> WorkerAck:
    master.dispatcher.register(worker_id, data, request_media_type(request))
    return WorkerAck(master.config.heartbeat)


@delete("/workers/{worker_id:str}", summary="Unregister a worker")
async def unregister_worker(master: NamedDependency[Master], worker_id: WorkerId) -> None:
    master.dispatcher.unregister(worker_id)


@get("/workers", summary="Registered workers and what they run")
async def list_workers(master: NamedDependency[Master]) -> list[WorkerStatus]:
    return master.dispatcher.statuses()


ConstraintPath = Annotated[str, PathParameter(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
ConstraintBody = Annotated[Constraint, Body(media_type=MSGPACK)]


@put("/constraints/{constraint_id:str}", summary="Create or replace a constraint")
async def put_constraint(
    master: NamedDependency[Master], constraint_id: ConstraintPath, data: ConstraintBody
) -> ConstraintSaved:
    moved = await master.jobs.set_constraint(constraint_id, data)
    return ConstraintSaved(moved)


@delete("/constraints/{constraint_id:str}", summary="Delete a constraint")
async def delete_constraint(master: NamedDependency[Master], constraint_id: ConstraintPath) -> None:
    await master.jobs.delete_constraint(constraint_id)


@get("/constraints", summary="Constraints and how much of each is in use")
async def list_constraints(master: NamedDependency[Master]) -> list[ConstraintStatus]:
    return await master.jobs.constraints()


@get("/overview", summary="Jobs per state, counters, workers")
async def overview(master: NamedDependency[Master]) -> Overview:
    stats = await master.queue.stats(fairness_top=0)  # polled: no per-tenant fairness
    states = {state.value: count for state, count in stats.states.items()}
    return Overview(states, stats.counters, master.dispatcher.statuses())


ROUTES = [
    enqueue,
    enqueue_many,
    list_jobs,
    job_detail,
    job_result,
    cancel_job,
    retry_job,
    report_job,
    register_worker,
    unregister_worker,
    list_workers,
    put_constraint,
    delete_constraint,
    list_constraints,
    overview,
]


# The bodies of the master's API, whose schemas its OpenAPI document carries.
MASTER_TYPES = (
    Job, JobCreated, JobsCreated, JobInfo, JobPage, Success, Failure, Done, JobReport, Reported,
    WorkerRegistration, WorkerAck, WorkerStatus, Constraint, ConstraintSaved, ConstraintStatus,
    Overview, SharesUpdate, LimitsUpdate, BulkRetry, BulkCancel, BulkDelete,
)  # fmt: skip


MASTER_DESCRIPTION = f"""The JQ master: push jobs, follow them, and run them on HTTP workers
that register here (the worker's API is this document's webhooks, and its own document).
Served by `fairque master`; docs/http.md tells the rest.

{MEDIA_TYPES}"""


def create_master(config: MasterConfig | None = None) -> Litestar:
    """The master app. It connects to the server when it starts, not before (so the
    OpenAPI document can be made without one)."""
    config = config or MasterConfig()
    master = Master(config)
    ui = Dashboard(
        UiConfig(config.url, config.namespace, config.settings, config.shards),
        lambda: master.dispatcher.statuses(),  # noqa: PLW0108 - it exists once started
        lambda: master.executor,
        master.outage,
        token_required=bool(config.token),
    )
    metrics = MasterMetrics(
        config.namespace, master.state_counts, master.registered_workers, master.outage
    )
    api = Router(
        "/",
        route_handlers=[*ROUTES, metrics.route()],
        dependencies={"master": Provide(lambda: master, use_cache=True, sync_to_thread=False)},
    )
    return create_app(
        "fairque JQ master",
        MASTER_DESCRIPTION,
        config.token,
        [api, ui.router(), *health_routes(ui.ping)],
        [master.running, ui.running],
        document=Document(MASTER_TYPES, {"Value": VALUE_SCHEMA}, worker_api),
        outage=master.outage,
        request_max_body_size=config.max_body,
        middleware=[metrics.middleware()],
    )
