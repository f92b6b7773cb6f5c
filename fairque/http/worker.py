"""The HTTP worker: runs ``@task`` functions behind the worker API.

The master POSTs a :class:`JobRequest` to ``/run``; the worker runs the function named
by the job (its ``argument`` is ``{"args": [...], "kwargs": {...}}``, or null) and
answers with the result object. While it runs, the worker registers with the
master and heartbeats (``PUT {master}/workers/{id}``), and unregisters when it stops.
A function with a ``context`` parameter reports its progress and log lines through it
(:mod:`fairque.http.context`). Any program that serves ``/run`` the same way is a
worker: see ``examples/``.

A worker that registers a ``batch`` over 1 also takes several jobs in one request,
``POST /runs``, and answers each job's result object as soon as that job ends, as a frame
of a streamed body (:func:`~fairque.http.protocol.result_frame`): a fast job's result
does not wait for a slow one's, and the HTTP cost of a request is paid once for the lot.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated

import httpx
import msgspec
from litestar import Litestar, post
from litestar.params import Body
from litestar.response import Stream

from fairque.engine.waiting import within
from fairque.errors import InvalidInput
from fairque.http.app import create_app
from fairque.http.context import JobContext, Reporter, SyncJobContext
from fairque.http.openapi import Document
from fairque.http.protocol import (
    MAX_RUNS,
    JobRequest,
    WorkerAck,
    WorkerRegistration,
    result_frame,
)
from fairque.http.wire import FRAMES, MSGPACK, WireOperation
from fairque.jobs import Failure, JobOutcome, Success, failure
from fairque.jobs.models import VALUE_SCHEMA
from fairque.runners.fair_worker.functions import Registry, call_arguments

log = logging.getLogger("fairque.http_worker")


@dataclass(frozen=True)
class HttpWorkerConfig:
    """How an HTTP worker runs."""

    master: str | None  # the master's URL; None: no registration (tests, manual setups)
    url: str  # where the master reaches this worker
    worker_id: str
    capacity: int = 4
    token: str | None = None  # the master's bearer token, used both ways


async def run_job(registry: Registry, job: JobRequest, reporter: Reporter) -> JobOutcome:
    """Runs the function the job names; every way it can end is a result object."""
    function = registry.get(job.name)
    if function is None:
        return failure("other", f"no task function named {job.name!r}", retry=False)
    try:
        args, kwargs = call_arguments(job.argument)
    except InvalidInput as exc:
        return failure("other", str(exc), retry=False)
    try:
        if function.is_async:
            if function.wants_context:
                kwargs["context"] = JobContext(job, reporter)
            result = await within(function.func(*args, **kwargs), job.timeout)
        else:
            if function.wants_context:
                kwargs["context"] = SyncJobContext(job, reporter, asyncio.get_running_loop())
            call = functools.partial(function.func, *args, **kwargs)
            # A sync function cannot be interrupted: at the deadline it is abandoned.
            result = await within(asyncio.to_thread(call), job.timeout)
    except asyncio.TimeoutError:
        return failure("timeout", f"timed out after {job.timeout:g} s")
    except Exception as exc:
        return failure("other", f"{type(exc).__name__}: {exc}")
    return Success(finished_at=datetime.now(timezone.utc), result=result)


class Registration:
    """Keeps the worker registered with the master while the app runs, and lends its
    connections to the ``reporter`` of the jobs it runs."""

    def __init__(self, config: HttpWorkerConfig, names: list[str]) -> None:
        self.config = config
        registration = WorkerRegistration(config.url, names, config.capacity, config.capacity)
        self.body = msgspec.msgpack.encode(registration)
        self.headers = {"content-type": MSGPACK, "accept": MSGPACK}
        if config.token:
            self.headers["authorization"] = f"Bearer {config.token}"
        self.reporter = Reporter(config.master, self.headers)

    @property
    def address(self) -> str:
        return f"{(self.config.master or '').rstrip('/')}/workers/{self.config.worker_id}"

    async def heartbeat(self, http: httpx.AsyncClient) -> None:
        """Registers, then registers again at the interval the master asks for."""
        wait = 1.0
        while True:
            try:
                response = await http.put(self.address, content=self.body, headers=self.headers)
                response.raise_for_status()
                wait = msgspec.msgpack.decode(response.content, type=WorkerAck).heartbeat
            except (httpx.HTTPError, msgspec.DecodeError) as exc:
                log.warning("cannot register with the master: %s", exc)
                wait = 1.0
            await asyncio.sleep(wait)

    @asynccontextmanager
    async def running(self, _app: Litestar) -> AsyncIterator[None]:
        if self.config.master is None:
            yield
            return
        async with httpx.AsyncClient(timeout=10.0) as http:
            beating = asyncio.create_task(self.heartbeat(http))
            self.reporter.http = http
            try:
                yield
            finally:
                self.reporter.http = None
                beating.cancel()
                with suppress(asyncio.CancelledError):
                    await beating
                with suppress(httpx.HTTPError):
                    await http.delete(self.address, headers=self.headers)


# The bodies of the worker API, whose schemas its OpenAPI document carries.
WORKER_TYPES = (JobRequest, Success, Failure)


def create_http_worker(config: HttpWorkerConfig, registry: Registry) -> Litestar:
    """The worker app serving the functions of ``registry``."""
    if not registry.functions:
        raise InvalidInput("tasks", "no task functions are registered")
    return _worker_app(config, registry)


def worker_api() -> Litestar:
    """The worker API alone (no functions, no master): for its OpenAPI document, which
    ``docs/worker-openapi.json`` holds and the master's document lists as a webhook."""
    return _worker_app(HttpWorkerConfig(None, "http://127.0.0.1:1", "schema"), Registry())


async def run_jobs(
    registry: Registry, jobs: Sequence[JobRequest], slots: asyncio.Semaphore, reporter: Reporter
) -> AsyncIterator[bytes]:
    """Runs ``jobs`` at once (each in a slot) and yields the result frames of those that
    ended, as they end. Closing it early (the master went away) cancels the rest."""

    async def run_in_slot(job: JobRequest) -> JobOutcome:
        async with slots:
            return await run_job(registry, job, reporter)

    running = {asyncio.ensure_future(run_in_slot(job)): n for n, job in enumerate(jobs)}
    try:
        while running:
            ended, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            yield b"".join(result_frame(running.pop(job), job.result()) for job in ended)
    finally:
        for job in running:
            job.cancel()


def _worker_app(config: HttpWorkerConfig, registry: Registry) -> Litestar:
    slots = asyncio.Semaphore(config.capacity)
    registration = Registration(config, sorted(registry.functions))

    @post(
        "/run",
        status_code=200,
        media_type=MSGPACK,
        operation_class=WireOperation,
        summary="Run one job; answer with the result object",
        description="The master POSTs each job it hands this worker here and waits up to "
        "the job's `timeout` seconds for the answer. When the master runs with a token, it "
        "sends `Authorization: Bearer <token>`, and a worker should check it.",
    )
    async def run(data: Annotated[JobRequest, Body(media_type=MSGPACK)]) -> JobOutcome:
        async with slots:
            return await run_job(registry, data, registration.reporter)

    @post(
        "/runs",
        status_code=200,
        media_type=FRAMES,
        operation_class=WireOperation,
        summary="Run several jobs; answer each result object as its job ends",
        response_description="Result frames, one per job as it ends",
        description="Only for a worker that registered a `batch` over 1, and with at most "
        "`batch` jobs. The answer is streamed: for each job as it ends, the length of a "
        "frame (4 bytes, big-endian), then the frame, the MessagePack array `[position of "
        "the job in the request, result object]`. The master waits up to each job's "
        "`timeout` seconds for its frame.",
    )
    async def runs(
        data: Annotated[
            list[JobRequest],
            Body(media_type=MSGPACK, description="The jobs.", min_items=1, max_items=MAX_RUNS),
        ],
    ) -> Stream:
        return Stream(run_jobs(registry, data, slots, registration.reporter), media_type=FRAMES)

    return create_app(
        "fairque HTTP worker",
        __doc__,
        config.token,
        [run, runs],
        [registration.running],
        document=Document(WORKER_TYPES, {"Value": VALUE_SCHEMA}),
    )
