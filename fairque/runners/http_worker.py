"""What an HTTP worker runs: the jobs the master sends it, each a call of the ``@task``
function it names, and its registration with the master, kept by heartbeats
(``PUT {master}/workers/{id}``) while it runs. The worker API that receives the jobs is
:mod:`fairque.http.worker`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timezone

import httpx
import msgspec
from litestar import Litestar

from fairque.engine.records import ErrorReport
from fairque.engine.waiting import within
from fairque.errors import InvalidInput
from fairque.http.context import JobContext, Reporter, SyncJobContext
from fairque.http.protocol import JobRequest, WorkerAck, WorkerRegistration
from fairque.http.wire import MSGPACK
from fairque.jobs import JobOutcome, Success, failure
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
        return failure("other", ErrorReport.of(exc))
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


async def run_jobs(
    registry: Registry,
    jobs: Sequence[JobRequest],
    slots: asyncio.Semaphore,
    reporter: Reporter,
) -> AsyncIterator[list[tuple[int, JobOutcome]]]:
    """Runs ``jobs`` at once (each in a slot) and yields the positions and result objects
    of those that ended, as they end. Closing it early (the master went away) cancels
    the rest."""

    async def run_in_slot(job: JobRequest) -> JobOutcome:
        async with slots:
            return await run_job(registry, job, reporter)

    running = {asyncio.ensure_future(run_in_slot(job)): n for n, job in enumerate(jobs)}
    try:
        while running:
            ended, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
            yield [(running.pop(job), job.result()) for job in ended]
    finally:
        for job in running:
            job.cancel()
