"""The master's dispatcher: leases jobs for registered HTTP workers with free capacity,
sends each to its worker, and records the result object the worker answers with.

The lease (job timeout + grace) is what keeps a job safe: if the worker vanishes, the
request fails and the job is retried; if the master itself dies, the lease expires and
the next pop or ``reap`` returns the job to the queue.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

import msgspec

from fairque.engine.calls import check_value
from fairque.engine.outage import OUTAGE, OutageLog
from fairque.engine.waiting import wait_event, within
from fairque.errors import InvalidInput, LeaseLost
from fairque.http.batches import completions
from fairque.http.connections import Broken, Connections, Unreachable
from fairque.http.protocol import JobRequest, WorkerRegistration, WorkerStatus
from fairque.http.wire import MSGPACK
from fairque.jobs import JobOutcome, LeasedJob, Success, failure
from fairque.jobs.client import AsyncJobQueue

log = logging.getLogger("fairque.master")

_outcome = msgspec.msgpack.Decoder(JobOutcome)


@dataclass
class WorkerSlot:
    """A registered worker as the dispatcher sees it."""

    id: str
    url: str
    names: tuple[str, ...]
    capacity: int
    seen: float  # time.monotonic() of its last heartbeat
    running: int = 0

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
        headers = {"content-type": MSGPACK, "accept": MSGPACK}
        if token:
            headers["authorization"] = f"Bearer {token}"
        self._http = Connections(headers)  # each call is bounded by its job's timeout
        self._deliveries: set[asyncio.Task[None]] = set()
        self._completions = completions(jobs)  # results that arrive together: one call

    def register(self, worker_id: str, registration: WorkerRegistration) -> None:
        """Adds a worker, or refreshes it (a heartbeat). A known worker is updated in place:
        its deliveries in flight hold it and count its running jobs down."""
        url, names = registration.url.rstrip("/"), tuple(registration.names)
        known = self.workers.get(worker_id)
        if known is None:
            self.workers[worker_id] = WorkerSlot(
                worker_id, url, names, registration.capacity, time.monotonic()
            )
        else:
            known.url, known.names, known.capacity = url, names, registration.capacity
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
            for job in await self.jobs.pop(worker.id, free, worker.names):
                self._start(worker, job)

    def _start(self, worker: WorkerSlot, job: LeasedJob) -> None:
        worker.running += 1
        delivery = asyncio.create_task(self._deliver(worker, job))
        self._deliveries.add(delivery)
        delivery.add_done_callback(self._deliveries.discard)

    async def _deliver(self, worker: WorkerSlot, job: LeasedJob) -> None:
        try:
            outcome = await self._call(worker, job)
            await self._completions((job, outcome))  # None: it never reached the worker
        except LeaseLost:
            log.warning("job %s: its lease expired before its result arrived", job.id)
        except Exception as exc:  # the lease returns the job when it expires
            log.warning("job %s: result not recorded: %s: %s", job.id, type(exc).__name__, exc)
        finally:
            worker.running -= 1
            self.wake.set()

    async def _call(self, worker: WorkerSlot, job: LeasedJob) -> JobOutcome | None:
        """The worker's result object; None if the job never reached the worker."""
        request = JobRequest(
            job.id, job.name, job.argument, job.priority, job.attempts + 1, job.timeout
        )
        body = msgspec.msgpack.encode(request)
        try:
            status, content = await within(self._http.post(worker.url, body), job.timeout)
        except asyncio.TimeoutError:
            return failure("timeout", f"no result within {job.timeout:g} s")
        except Unreachable as exc:
            # Gone, or at a URL that cannot be reached (a host name IDNA refuses): forget
            # it until its next heartbeat, or every round would pick it again.
            if self.workers.get(worker.id) is worker:
                log.warning("worker %s dropped: %s: %s", worker.id, type(exc).__name__, exc)
                del self.workers[worker.id]
            return None
        except Broken as exc:  # the worker went away during the job
            return failure("other", f"worker {worker.id} failed: {exc}")
        if status != 200:
            return failure("other", f"worker {worker.id} answered HTTP {status}")
        try:
            outcome: JobOutcome = _outcome.decode(content)
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
            return failure("other", f"worker {worker.id} sent no valid result object: {exc}")
        except RecursionError:
            return failure("other", f"worker {worker.id} sent a result nested too deeply")
        if isinstance(outcome, Success):
            value, field = outcome.result, "result"
        else:
            value, field = outcome.error, "error"
        try:  # what the pusher could not read back as sent is not kept
            check_value(value, field)
        except InvalidInput as exc:
            return failure("other", f"worker {worker.id} sent a result object not kept: {exc}")
        return outcome
