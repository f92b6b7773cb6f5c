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
from typing import Annotated

from litestar import Litestar, post
from litestar.params import Body
from litestar.response import Stream

from fairque.errors import InvalidInput
from fairque.http.app import create_app
from fairque.http.openapi import Document
from fairque.http.protocol import MAX_RUNS, JobRequest
from fairque.http.wire import FRAMES, MSGPACK, WireOperation
from fairque.jobs import Failure, JobOutcome, Success
from fairque.jobs.models import VALUE_SCHEMA
from fairque.runners.fair_worker.functions import Registry
from fairque.runners.http_worker import HttpWorkerConfig, Registration, run_job, run_jobs

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
