"""Draining a queue in a test: the tasks that are ready or due run in this process, one
at a time, through the real engine (its pop, finish and fail scripts: retries with their
backoff, dependents released when a task finishes) and the worker's own runs
(:class:`~fairque.runners.fair_worker.runs.Runs`: the same calls, contexts and timeouts),
until none is left to run now.

A task delayed into the future, or a retry still in its backoff, is not run: the server's
clock decides when it is due, and a test does not move it. ``wait_due`` lets the drain
wait (in the pop, which the server ends the moment work comes due) for what comes due
within that many seconds; the testing fixtures' namespaces retry at once
(``retry_backoff_base=0``), so retries run in the same drain without it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from redis.asyncio import SSLConnection as AsyncSSLConnection
from redis.connection import SSLConnection

from fairque.engine import sentinel
from fairque.engine.outage import OutageLog
from fairque.engine.records import TaskState
from fairque.engine.routes import describe
from fairque.errors import InvalidInput
from fairque.queue.async_client import AsyncFairQueue, AsyncQueue
from fairque.queue.client import Queue
from fairque.queue.models import LeasedTask, TaskInfo
from fairque.runners.fair_worker.acks import Acknowledgements
from fairque.runners.fair_worker.config import WorkerConfig
from fairque.runners.fair_worker.counts import Counts
from fairque.runners.fair_worker.functions import Registry, registry
from fairque.runners.fair_worker.hooks import WorkerHooks
from fairque.runners.fair_worker.runs import Runs

log = logging.getLogger("fairque.testing")

Ending = Literal["succeeded", "retried", "failed", "canceled"]
DEFAULT_LIMIT = 1000  # runs in one drain: a task that pushes another forever ends there


@dataclass(frozen=True)
class Ran:
    """One attempt a drain ran, and how it ended: ``result`` (what the function
    returned) when it succeeded, else ``error``; ``retried`` means it comes back."""

    task_id: str
    name: str | None
    tenant: str
    attempt: int  # 1 for the first
    state: Ending
    result: Any = None
    error: str | None = None


class _Recorder(WorkerHooks):
    """Keeps how each attempt ended, as the worker's hooks hear it."""

    def __init__(self) -> None:
        self.ran: list[Ran] = []

    def record(self, task: LeasedTask, state: Ending, result: Any = None,
               error: str | None = None) -> None:  # fmt: skip
        attempt = task.attempts + 1
        self.ran.append(Ran(task.task_id, task.name, task.user_id, attempt, state, result, error))

    def on_success(self, task: LeasedTask, result: Any, seconds: float) -> None:
        self.record(task, "succeeded", result=result)

    def on_retry(self, task: LeasedTask, error: str, seconds: float) -> None:
        self.record(task, "retried", error=error)

    def on_failure(self, task: LeasedTask, error: str, seconds: float) -> None:
        self.record(task, "failed", error=error)

    def on_cancel(self, task: LeasedTask, seconds: float) -> None:
        self.record(task, "canceled")

    def not_finished(self, info: TaskInfo | None) -> None:
        """The last success was not recorded (its result was refused, or the task was
        canceled meanwhile): how the server says it ended."""
        last = self.ran.pop()
        state: Ending = "canceled" if info and info.state is TaskState.CANCELED else "failed"
        error = info.last_error if info else "the task is gone"
        self.ran.append(Ran(last.task_id, last.name, last.tenant, last.attempt, state, None, error))


def _where(queue: AsyncQueue | Queue) -> tuple[str, str]:
    """The URL of the one server a queue of one namespace uses, and the namespace: the
    drain opens clients of the other kind there (sync functions' contexts are blocking
    clients; a blocking queue is drained through an asyncio one)."""
    pool = getattr(queue.redis, "connection_pool", None)
    one = queue.one_namespace
    if one is None or pool is None or sentinel.is_sentinel_pool(pool):
        raise InvalidInput("queue", "drain runs a queue of one namespace on one server "
                           "(not sharded, a cluster or behind sentinels)")  # fmt: skip
    if issubclass(pool.connection_class, (SSLConnection, AsyncSSLConnection)):
        raise InvalidInput("queue", "drain runs a queue on a server without TLS")
    options = pool.connection_kwargs
    db = options.get("db", 0)
    if "path" in options:
        return f"unix://{options['path']}?db={db}", one.name
    user, password = options.get("username"), options.get("password")
    login = f"{quote(user or '', safe='')}:{quote(password, safe='')}@" if password else ""
    host, port = options.get("host", "localhost"), options.get("port", 6379)
    return f"redis://{login}{host}:{port}/{db}", one.name


async def _next(queue: AsyncQueue, worker_id: str, deadline: float) -> LeasedTask | None:
    """The next task ready or due, waiting until ``deadline`` (monotonic) for one that
    comes due by then; None when there is none."""
    wait = None
    while True:
        leased = await queue.pop(worker_id=worker_id, wait=wait)
        if leased:
            return leased[0]
        due = await queue.next_due()
        left = deadline - time.monotonic()
        if due is None or due > left or left <= 0:
            return None
        wait = left  # the server ends the pop's wait once work comes due


async def async_drain(
    queue: AsyncQueue,
    functions: Registry | None = None,
    *,
    wait_due: float = 0.0,
    limit: int = DEFAULT_LIMIT,
) -> list[Ran]:
    """Runs the tasks of ``queue`` (one namespace on one server) that are ready or due,
    one at a time, until none is, with ``functions`` (default: every ``@task``); returns
    the attempts in the order they ran. ``wait_due``: seconds to wait for tasks that come
    due (a delay, a retry's backoff); ``limit``: the most attempts it runs.

    A task whose function is not registered fails ("unknown task function"), as it
    would on a worker that leased it."""
    if not 0 <= wait_due <= 3600:
        raise InvalidInput("wait_due", f"must be 0 to 3600 seconds, got {wait_due!r}")
    if limit < 1:
        raise InvalidInput("limit", f"must be at least 1, got {limit!r}")
    url, namespace = _where(queue)
    config = WorkerConfig(redis_url=url, namespace=namespace, concurrency=1)
    recorder = _Recorder()
    counts = Counts()
    outage = OutageLog(log, describe(queue.executor.route), "the drain stops")
    acks = Acknowledgements(counts, outage)
    events = (asyncio.Event(), asyncio.Event(), asyncio.Event())  # stopping, now, look_again
    runs = Runs(config, functions or registry, recorder, None, acks, counts, outage, *events)
    deadline = time.monotonic() + wait_due
    await runs.sync.start()
    try:
        while len(recorder.ran) < limit:
            leased = await _next(queue, config.id, deadline)
            if leased is None:
                break
            before, finished = len(recorder.ran), counts.finished
            runs.start(queue, leased)
            await runs.running[leased.task_id].job
            await acks.flush(queue)
            succeeded = [ran for ran in recorder.ran[before:] if ran.state == "succeeded"]
            if succeeded and counts.finished == finished:
                recorder.not_finished(await queue.get(leased.task_id))
    finally:
        await runs.sync.close()
        runs.close()
    return recorder.ran


def drain(
    queue: Queue,
    functions: Registry | None = None,
    *,
    wait_due: float = 0.0,
    limit: int = DEFAULT_LIMIT,
) -> list[Ran]:
    """:func:`async_drain` for a blocking queue (from a test without an event loop)."""

    async def run() -> list[Ran]:
        async with AsyncFairQueue(*_where(queue)) as twin:
            return await async_drain(twin, functions, wait_due=wait_due, limit=limit)

    return asyncio.run(run())
