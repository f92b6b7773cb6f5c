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
from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Litestar, Request, Response, post
from litestar.openapi.spec import OpenAPIMediaType, OpenAPIResponse, OpenAPIType, Reference, Schema
from litestar.params import Body
from litestar.response import Stream

from fairque.errors import InvalidInput
from fairque.http.app import create_app
from fairque.http.openapi import Document
from fairque.http.protocol import MAX_RUNS, JobRequest, result_frame
from fairque.http.wire import (
    FRAMES,
    JSON,
    MEDIA_TYPES,
    MSGPACK,
    WireOperation,
    encode_body,
    wants_json,
)
from fairque.jobs import Failure, JobOutcome, Success
from fairque.jobs.models import VALUE_SCHEMA
from fairque.runners.fair_worker.functions import Registry
from fairque.runners.http_worker import HttpWorkerConfig, Registration, run_job, run_jobs

# The bodies of the worker API, whose schemas its OpenAPI document carries.
WORKER_TYPES = (JobRequest, Success, Failure)


WORKER_DESCRIPTION = f"""What an HTTP worker serves: the master POSTs each job to `/run`
(or several to `/runs`, for a worker that registered a `batch` over 1) and reads the result
object the worker answers with. A worker registers with the master (`PUT /workers/{{id}}`
of the master's document, again as its heartbeat) with the `media_type` it speaks:
`application/json` or `application/msgpack` (left out: the type of the registration's
own body). The master sends it bodies of that type, with an `Accept` naming it, and reads
its answers by their `Content-Type`. When the master runs with a token, it sends
`Authorization: Bearer <token>`, and a worker should check it. `fairque http-worker`
serves this API for `@task` functions.

{MEDIA_TYPES}"""


@dataclass
class RunsOperation(WireOperation):
    """``/runs``: its answer is also offered as JSON, a list of result objects."""

    def __post_init__(self) -> None:
        super().__post_init__()
        answer = (self.responses or {}).get("200")
        if isinstance(answer, OpenAPIResponse) and answer.content is not None:
            outcome = [
                Reference(f"#/components/schemas/{kind.__name__}") for kind in (Success, Failure)
            ]
            listed = Schema(type=OpenAPIType.ARRAY, items=Schema(one_of=outcome))
            answer.content[JSON] = OpenAPIMediaType(schema=listed)


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
        operation_class=RunsOperation,
        summary="Run several jobs; answer their result objects",
        response_description="Result frames, one per job as it ends (MessagePack), or the "
        "list of the result objects (JSON)",
        description="Only for a worker that registered a `batch` over 1, and with at most "
        f"`batch` jobs. In MessagePack the answer is streamed (`{FRAMES}`): for each job as it "
        "ends, the length of a frame (4 bytes, big-endian), then the frame, the array "
        "`[position of the job in the request, result object]`. In JSON it is the list of "
        "the jobs' result objects, in the request's order, once every job ended. The master "
        "asks for the type the worker registered with, reads the answer by its "
        "Content-Type, and waits up to each job's `timeout` seconds for its result.",
    )
    async def runs(
        data: Annotated[
            list[JobRequest],
            Body(media_type=MSGPACK, description="The jobs.", min_items=1, max_items=MAX_RUNS),
        ],
        request: Request[Any, Any, Any],
    ) -> Stream | Response[bytes]:
        ended = run_jobs(registry, data, slots, registration.reporter)
        if wants_json(request):  # a list of result objects, in order
            outcomes: list[JobOutcome | None] = [None] * len(data)
            async for results in ended:
                for position, outcome in results:
                    outcomes[position] = outcome
            return Response(encode_body(outcomes, as_json=True), media_type=JSON)
        frames = (b"".join(result_frame(*result) for result in results) async for results in ended)
        return Stream(frames, media_type=FRAMES)

    return create_app(
        "fairque HTTP worker",
        WORKER_DESCRIPTION,
        config.token,
        [run, runs],
        [registration.running],
        document=Document(WORKER_TYPES, {"Value": VALUE_SCHEMA}),
    )
