"""The master's dispatcher: leases jobs for registered HTTP workers with free capacity,
sends them to their worker, and records the result object the worker answers with. To
a worker that takes batches, the jobs leased together go in one request, and each
result is recorded as it arrives; to others, one job per request.

The lease (job timeout + grace) is what keeps a job safe: if the worker vanishes, the
request fails and the job is retried; if the master itself dies, the lease expires and
the next pop or ``reap`` returns the job to the queue.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import msgspec

from fairque.engine.calls import check_value
from fairque.engine.outage import OUTAGE, OutageLog
from fairque.engine.waiting import wait_event, within
from fairque.errors import InvalidInput, LeaseLost
from fairque.http.connections import Broken, Connections, Unreachable
from fairque.http.protocol import (
    BadFrame,
    JobRequest,
    ResultFrames,
    WorkerRegistration,
    WorkerStatus,
)
from fairque.http.wire import FRAMES, JSON, MSGPACK, MSGPACK_TYPES, decode_body, encode_body
from fairque.jobs import JobOutcome, LeasedJob, Success, failure
from fairque.jobs.async_client import AsyncJobQueue
from fairque.jobs.batching import completions

log = logging.getLogger("fairque.master")

# What a worker's answer may hold that the master cannot read: it fails the job, saying why.
UNREADABLE = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, ValueError)


@dataclass
class WorkerSlot:
    """A registered worker as the dispatcher sees it."""

    id: str
    url: str
    names: tuple[str, ...]
    capacity: int
    batch: int  # jobs it takes in one request (POST {url}/runs); 1: one per POST {url}/run
    seen: float  # time.monotonic() of its last heartbeat
    media_type: str = MSGPACK  # of the bodies it is sent: MSGPACK or JSON
    running: int = 0

    @property
    def headers(self) -> dict[str, str]:
        """The headers of a request to it: a body it reads and the answers it may give."""
        accept = JSON if self.media_type == JSON else f"{MSGPACK}, {FRAMES}"
        return {"content-type": self.media_type, "accept": accept}

    def status(self, now: float) -> WorkerStatus:
        return WorkerStatus(
            self.id, self.url, list(self.names), self.capacity, self.running, now - self.seen
        )


class Dispatcher:
    """Moves jobs from the queue to HTTP workers until stopped."""

    def __init__(
        self,
        jobs: AsyncJobQueue,
        heartbeat: float = 5.0,
        poll: float = 0.5,
        token: str | None = None,
        outage: OutageLog | None = None,
    ) -> None:
        self.jobs = jobs
        self.outage = outage or OutageLog(log, "of the queue", "dispatching waits for it")
        self.heartbeat = heartbeat
        self.poll = poll
        self.workers: dict[str, WorkerSlot] = {}
        self.wake = asyncio.Event()
        self._stopping = asyncio.Event()
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self._http = Connections(headers)  # each call is bounded by its job's timeout
        self._deliveries: set[asyncio.Task[None]] = set()
        self._completions = completions(jobs)  # results that arrive together: one call

    def register(
        self, worker_id: str, registration: WorkerRegistration, sent_as: str = MSGPACK
    ) -> None:
        """Adds a worker, or refreshes it (a heartbeat). A known worker is updated in place:
        its deliveries in flight hold it and count its running jobs down. It is sent bodies
        of its registration's ``media_type``, or of the type the registration was
        ``sent_as``."""
        url, names = registration.url.rstrip("/"), tuple(registration.names)
        media_type = registration.media_type or (JSON if sent_as == JSON else MSGPACK)
        known = self.workers.get(worker_id)
        if known is None:
            self.workers[worker_id] = WorkerSlot(
                worker_id, url, names, registration.capacity, registration.batch,
                time.monotonic(), media_type,
            )  # fmt: skip
        else:
            known.url, known.names, known.capacity = url, names, registration.capacity
            known.batch, known.media_type = registration.batch, media_type
            known.seen = time.monotonic()
        self.wake.set()

    def unregister(self, worker_id: str) -> bool:
        """Forgets a worker (jobs it is running still complete); False if unknown."""
        return self.workers.pop(worker_id, None) is not None

    def statuses(self) -> list[WorkerStatus]:
        now = time.monotonic()
        return [worker.status(now) for worker in self.workers.values()]

    async def run(self) -> None:
        """Dispatches until :meth:`stop`; waits for a wake-up (a push, a free slot, a new
        worker) or ``poll`` seconds (retries whose backoff ended, expired leases). It is
        stopped by an event, never cancelled mid-command: a cancelled redis-py call may
        leave its connection unusable."""
        while not self._stopping.is_set():
            self.wake.clear()
            try:
                if self.outage.down:  # the next round with no worker would not notice
                    await self.jobs.executor.ping()
                    self.outage.answered()
                await self._fill()
            except OUTAGE as exc:  # logged once per outage; try again next round
                self.outage.failed(exc)
            except Exception as exc:
                log.warning("dispatch failed: %s: %s", type(exc).__name__, exc)
            await wait_event(self.wake, self.poll)

    def stop(self) -> None:
        """Ends :meth:`run` after its current round."""
        self._stopping.set()
        self.wake.set()

    async def close(self) -> None:
        """Waits for the jobs being delivered, then closes the HTTP client."""
        if self._deliveries:
            await asyncio.wait(self._deliveries)
        await self._http.aclose()

    async def _fill(self) -> None:
        silent = time.monotonic() - 3 * self.heartbeat
        for worker in list(self.workers.values()):
            if worker.seen < silent:
                log.warning("worker %s missed its heartbeats; dropped", worker.id)
                del self.workers[worker.id]
                continue
            free = worker.capacity - worker.running
            if free <= 0:
                continue
            jobs = await self.jobs.pop(worker.id, free, worker.names)
            worker.running += len(jobs)
            for first in range(0, len(jobs), worker.batch):
                batch = jobs[first : first + worker.batch]
                self._track(self._deliver(worker, batch[0]) if len(batch) == 1
                            else self._deliver_many(worker, batch))  # fmt: skip

    def _track(self, delivery: Coroutine[Any, Any, None]) -> None:
        """Runs ``delivery`` on its own; :meth:`close` waits for it."""
        task = asyncio.create_task(delivery)
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)

    async def _deliver(self, worker: WorkerSlot, job: LeasedJob) -> None:
        """One job in one request (``/run``)."""
        try:
            outcome = await self._call(worker, job)
        except BaseException:
            self._ended(worker)
            raise
        await self._record(worker, job, outcome)

    async def _deliver_many(self, worker: WorkerSlot, jobs: list[LeasedJob]) -> None:
        """Several jobs in one request (``/runs``): each result is recorded as its frame
        arrives, and each job that outlives its own timeout fails then, whatever the
        others do."""
        waiting = dict(enumerate(jobs))  # by position in the request: no result yet
        started = time.monotonic()
        reading = asyncio.create_task(self._read_results(worker, jobs, waiting))
        while waiting and not reading.done():
            now = time.monotonic()
            first = min(started + job.timeout for job in waiting.values())
            await asyncio.wait([reading], timeout=max(0.0, first - now))
            now = time.monotonic()
            for position, job in list(waiting.items()):
                if started + job.timeout <= now:
                    del waiting[position]
                    self._track(self._record(worker, job, timed_out(job)))
        if not reading.done():  # every job timed out: the request is abandoned
            reading.cancel()
        lost = await asyncio.gather(reading, return_exceptions=True)
        if isinstance(lost[0], Exception):
            log.warning("jobs for worker %s: %s: %s", worker.id, type(lost[0]).__name__, lost[0])
        for job in waiting.values():  # the answer ended without their results
            self._track(self._record(worker, job, failure("other", f"worker {worker.id} "
                                                          "sent no result for it")))  # fmt: skip

    async def _read_results(
        self, worker: WorkerSlot, jobs: list[LeasedJob], waiting: dict[int, LeasedJob]
    ) -> None:
        """Sends ``jobs`` to ``/runs`` and records each result that arrives for a job
        still ``waiting`` (which it takes out of ``waiting``)."""

        def settle(outcome: JobOutcome | None) -> None:  # every job still waiting
            for job in waiting.values():
                self._track(self._record(worker, job, outcome))
            waiting.clear()

        body = _encode([_request(job) for job in jobs], worker.media_type)
        try:
            async with self._http.request(worker.url, body, "runs", worker.headers) as answer:
                if answer.status != 200:
                    settle(failure("other", f"worker {worker.id} answered HTTP {answer.status}"))
                    return
                if answer.media_type == JSON:  # every result at once, in order
                    results = enumerate(self._listed(worker, await answer.read(), len(jobs)))
                    for position, outcome in results:
                        self._recorded(worker, waiting, position, outcome)
                    return
                frames = ResultFrames()
                async for piece in answer.pieces():
                    for frame in frames.feed(piece):
                        self._recorded(worker, waiting, *self._frame(worker, frame, len(jobs)))
        except Unreachable as exc:
            self._unreachable(worker, exc)
            settle(None)
        except Broken as exc:
            settle(failure("other", f"worker {worker.id} failed: {exc}"))
        except BadFrame as exc:
            settle(failure("other", f"worker {worker.id} sent no valid result frame: {exc}"))

    def _recorded(
        self, worker: WorkerSlot, waiting: dict[int, LeasedJob], position: int, outcome: JobOutcome
    ) -> None:
        """Records the result of the job at ``position``, if it is still ``waiting`` (not
        one that timed out meanwhile)."""
        job = waiting.pop(position, None)
        if job is not None:
            self._track(self._record(worker, job, outcome))

    def _frame(self, worker: WorkerSlot, frame: bytes, jobs: int) -> tuple[int, JobOutcome]:
        """A frame's job position and its result object (checked as :meth:`_call`'s)."""
        position, outcome = _decoded(frame, MSGPACK, tuple[int, JobOutcome])
        if not 0 <= position < jobs:
            raise BadFrame(f"position {position} of a request of {jobs} jobs")
        return position, self._checked(worker, outcome)

    def _listed(self, worker: WorkerSlot, body: bytes, jobs: int) -> list[JobOutcome]:
        """The result objects of a JSON ``/runs`` answer, one per job in order (checked
        as :meth:`_call`'s)."""
        outcomes: list[JobOutcome] = _decoded(body, JSON, list[JobOutcome])
        if len(outcomes) != jobs:
            raise BadFrame(f"{len(outcomes)} result objects for a request of {jobs} jobs")
        return [self._checked(worker, outcome) for outcome in outcomes]

    async def _record(self, worker: WorkerSlot, job: LeasedJob, outcome: JobOutcome | None) -> None:
        """Records a job's result (None: it never reached the worker: hand it back)."""
        try:
            await self._completions((job, outcome))
        except LeaseLost:
            log.warning("job %s: its lease expired before its result arrived", job.id)
        except Exception as exc:  # the lease returns the job when it expires
            log.warning("job %s: result not recorded: %s: %s", job.id, type(exc).__name__, exc)
        finally:
            self._ended(worker)

    def _ended(self, worker: WorkerSlot) -> None:
        worker.running -= 1
        self.wake.set()

    def _unreachable(self, worker: WorkerSlot, exc: Unreachable) -> None:
        """Gone, or at a URL that cannot be reached (a host name IDNA refuses): forget it
        until its next heartbeat, or every round would pick it again."""
        if self.workers.get(worker.id) is worker:
            log.warning("worker %s dropped: %s: %s", worker.id, type(exc).__name__, exc)
            del self.workers[worker.id]

    async def _call(self, worker: WorkerSlot, job: LeasedJob) -> JobOutcome | None:
        """The worker's result object; None if the job never reached the worker."""
        try:
            status, kind, content = await within(self._run(worker, job), job.timeout)
        except asyncio.TimeoutError:
            return timed_out(job)
        except Unreachable as exc:
            self._unreachable(worker, exc)
            return None
        except Broken as exc:  # the worker went away during the job
            return failure("other", f"worker {worker.id} failed: {exc}")
        if status != 200:
            return failure("other", f"worker {worker.id} answered HTTP {status}")
        if kind != JSON and kind not in MSGPACK_TYPES:  # unlabelled: what it was sent
            kind = worker.media_type
        try:
            outcome: JobOutcome = decode_body(content, kind, JobOutcome)
        except UNREADABLE as exc:
            return failure("other", f"worker {worker.id} sent no valid result object: {exc}")
        except RecursionError:
            return failure("other", f"worker {worker.id} sent a result nested too deeply")
        return self._checked(worker, outcome)

    async def _run(self, worker: WorkerSlot, job: LeasedJob) -> tuple[int, str, bytes]:
        """POST {worker}/run: the answer's status, media type and body."""
        body = _encode(_request(job), worker.media_type)
        async with self._http.request(worker.url, body, "run", worker.headers) as answer:
            return answer.status, answer.media_type, await answer.read()

    def _checked(self, worker: WorkerSlot, outcome: JobOutcome) -> JobOutcome:
        """``outcome``, or a failure if its value could not be read back as sent."""
        if isinstance(outcome, Success):
            value, field = outcome.result, "result"
        else:
            value, field = outcome.error, "error"
        try:  # what the pusher could not read back as sent is not kept
            check_value(value, field)
        except InvalidInput as exc:
            return failure("other", f"worker {worker.id} sent a result object not kept: {exc}")
        return outcome


def _decoded(body: bytes, kind: str, target: Any) -> Any:
    """``body`` decoded as ``target``; raises :class:`BadFrame` if it cannot be."""
    try:
        return decode_body(body, kind, target)
    except UNREADABLE as exc:
        raise BadFrame(str(exc)) from None
    except RecursionError:
        raise BadFrame("nested too deeply") from None


def _request(job: LeasedJob) -> JobRequest:
    return JobRequest(
        job.id, job.name, job.argument, job.priority, job.attempts + 1, job.timeout,
        job.lease_token,
    )  # fmt: skip


def _encode(body: JobRequest | list[JobRequest], media_type: str) -> bytes:
    return encode_body(body, media_type == JSON)


def timed_out(job: LeasedJob) -> JobOutcome:
    """The failure of a job whose result did not come within its timeout."""
    return failure("timeout", f"no result within {job.timeout:g} s")
