"""The worker: leases tasks fairly and runs their registered functions.

One asyncio loop fetches as many tasks as it has free slots (``concurrency``; slots that
free up while a pop is in flight get a second one at once), runs async
functions on the loop and sync ones on threads or in task processes (``sync_runner``, see
:mod:`fairque.runners.fair_worker.sync_runners`), extends the leases of running tasks (heartbeat),
fails a task that outlives its timeout, and, when idle, waits for work so a new task is
picked up at once rather than at the next poll: a worker of one namespace on one server
waits in its pop (``pop(wait=...)``), which the server runs the moment work arrives; one
of a cluster or of a sharded queue, or one that names its tenants, waits on the
namespace's wake channel, then pops. Successes are
acknowledged in batches, so a round trip per task does not cap throughput: in the pop
for the slots their tasks freed (one call, ``finish_and_pop``, on a queue of one
namespace), or, when no pop is about to go, in one ``finish_many`` that carries every
task that finished while the previous one was in flight. On stop
(SIGTERM / SIGINT) it fetches no more, lets running tasks finish for ``grace_seconds``,
then hands the rest back to the queue in one call, except runs that cannot be stopped
(a sync function's thread): those keep their lease, which expires once the process is
gone, so no task runs twice at once. A second signal stops at once, without the grace.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from fairque.engine.eviction import async_eviction_warning
from fairque.engine.notify import AsyncListener
from fairque.engine.observer import Observer
from fairque.engine.outage import OUTAGE, Backoff, OutageLog
from fairque.engine.records import TaskState
from fairque.engine.routes import describe
from fairque.engine.waiting import wait_event
from fairque.errors import InvalidInput, LeaseLost
from fairque.queue.async_client import AsyncFairQueue, AsyncQueue, open_async_queue
from fairque.queue.calls.maintenance import MAINTENANCE_ROUNDS
from fairque.queue.client import Queue, open_queue
from fairque.queue.models import LeasedTask, WorkerInfo
from fairque.runners.fair_worker.config import WorkerConfig
from fairque.runners.fair_worker.context import SyncTaskContext, TaskContext
from fairque.runners.fair_worker.functions import Registry, call_arguments, registry
from fairque.runners.fair_worker.hooks import WorkerHooks
from fairque.runners.fair_worker.sync_runners import (
    ProcessRunner,
    RunFailed,
    SyncRunner,
    ThreadRunner,
)

try:
    from uvloop import run as run_loop
except ImportError:  # pragma: no cover - PyPy and Windows, where uvloop is not installed
    from asyncio import run as run_loop  # type: ignore[assignment]

log = logging.getLogger("fairque.worker")
T = TypeVar("T")

WAKE_CHECK_SECONDS = 0.25  # how often an idle worker looks at its stop flag
MIN_IDLE_WAIT_SECONDS = 0.005  # an idle pop waits at least this long: no busy loop
LAST_ACKS_SECONDS = 1.0  # after a stop without grace, pending acknowledgements get this long


@dataclass(frozen=True)
class Outcome:
    """How one attempt ended: a result, or an error and whether to retry; or stopped by
    the worker (canceled, or its lease lost: nothing to record)."""

    result: Any = None
    error: str | None = None
    retry: bool = True
    stopped: bool = False


@dataclass
class RunningTask:
    """A task this worker runs: its lease, the asyncio task of its run, the flag set when
    the run must stop (what ``context.cancelled`` reads) and why."""

    leased: LeasedTask
    job: asyncio.Task[None]
    cancel_event: threading.Event
    stopped_because: str = ""  # "canceled" or "lease lost", once stopped


class Worker:
    """Runs registered task functions from one namespace.

    >>> Worker(load_config(Path("worker.yaml"))).run()  # doctest: +SKIP
    """

    def __init__(
        self,
        config: WorkerConfig,
        functions: Registry | None = None,
        queue: AsyncQueue | None = None,
        metrics: Observer | None = None,
        *,
        check_eviction: bool = True,
        hooks: WorkerHooks | None = None,
    ) -> None:
        self.config = config
        self.hooks = hooks or WorkerHooks()  # around each run, and after its outcome
        # Whether it says, at its start, that the server may evict task keys (one of the
        # processes of `fairque worker --processes N` says it for all).
        self.check_eviction = check_eviction
        self.functions = functions or registry
        self._queue = queue
        self.metrics = metrics  # task durations go to fairque_task_duration_seconds
        self._running: dict[str, RunningTask] = {}
        self._timed_out: set[asyncio.Task[Any]] = set()  # runs cancelled by their timer
        self._stopping = asyncio.Event()
        self._now = asyncio.Event()  # stop without the grace period (a second signal)
        # Set when the fetch loop should look again: a slot freed, a pop came back, a stop.
        self._look_again = asyncio.Event()
        self._acks: list[tuple[LeasedTask, Any]] = []  # finished, not yet acknowledged
        self._acks_waiting = asyncio.Event()
        self._closing = False
        self._sync: SyncRunner = (
            ProcessRunner(self.functions, config) if config.sync_runner == "process"
            else ThreadRunner(config.concurrency, self._sync_context)
        )  # fmt: skip
        self.finished = 0
        self.failed = 0
        self.outages = 0  # times the server was found unreachable
        # Says when the server is lost and back (its name once the queue is known).
        self._outage = OutageLog(log, "", "the worker waits for it; tasks running now go on")
        self.handed_back = 0  # unfinished tasks released at the stop
        self._sync_queue: Queue | None = None
        self._started_at = time.time()
        self._names: tuple[str, ...] = ()  # the task names its pops ask for, set by the run
        self._idle_pops = False  # the last pop found nothing: the next one waits for work
        self._pops_short = True  # the last pop leased fewer than it asked for
        self._waiting: AsyncFairQueue | None = None  # the queue of the pop waiting now
        self._stop_wait: asyncio.Future[None] | None = None  # stop() ending that wait

    def stop(self, now: bool = False) -> None:
        """Asks the worker to stop (from the worker's event loop): it fetches no more and
        gives running tasks ``grace_seconds`` to finish, or none with ``now``."""
        self._stopping.set()
        self._look_again.set()  # a fetch loop waiting for a free slot must notice the stop
        if self._waiting is not None:  # an idle pop: it pops now, then the loop sees the stop
            self._stop_wait = asyncio.ensure_future(self._waiting.stop_waiting())
        if now:
            self._now.set()

    def _on_signal(self) -> None:
        if self._stopping.is_set():
            log.warning("worker %s: second signal, stopping now", self.config.id)
            self.stop(now=True)
            return
        log.warning("worker %s stopping: running tasks get %g s to finish (a second signal "
                    "stops at once)", self.config.id, self.config.grace_seconds)  # fmt: skip
        self.stop()

    def run(self) -> None:
        """Runs until SIGTERM or SIGINT (a second one stops at once), on uvloop where it
        is installed (fairque depends on it on CPython outside Windows): the per-task
        path costs about a sixth less CPU there than on asyncio's own loop."""
        run_loop(self.run_async(handle_signals=True))

    async def run_async(self, handle_signals: bool = False) -> None:
        """Runs until :meth:`stop` (or a signal, with ``handle_signals``).

        Raises :class:`InvalidInput` at once if its sync functions cannot run as
        ``sync_runner`` asks (a function a task process cannot import)."""
        config = self.config
        if not self.functions.functions:
            # It would lease every task and run none of them.
            raise InvalidInput("tasks", "no task functions registered: import a module of @task")
        self._names = tuple(sorted(self.functions.functions))  # the lanes its pops reach
        signals = (signal.SIGTERM, signal.SIGINT) if handle_signals else ()
        loop = asyncio.get_running_loop()
        try:
            await self._sync.start()
            for signum in signals:
                loop.add_signal_handler(signum, self._on_signal)
            await self._serve(
                self._queue
                or open_async_queue(
                    config.redis_url, config.namespace, config.shards, settings=config.settings
                )
            )
        finally:
            for signum in signals:
                loop.remove_signal_handler(signum)
            await self._sync.close()

    def _waits_in_pop(self, queue: AsyncQueue) -> bool:
        """True when the idle wait can be the pop's own: one namespace (one server or
        one cluster node), and no named tenants (a worker that cannot take the work a
        wake-up announces would wake again at once, for ever)."""
        return (
            isinstance(queue, AsyncFairQueue)
            and self.config.assigned_users is None
            and self.config.steal_targets is None
        )

    async def _serve(self, queue: AsyncQueue) -> None:
        config = self.config
        self._outage.server = describe(queue.executor.route)
        wake: AsyncListener | None = None
        if not self._waits_in_pop(queue):
            wake = await self._subscribe_when_reachable(queue)
            if wake is None:  # stopped before the server could be reached
                if self._queue is None:
                    await queue.close()
                return
        heartbeat = asyncio.create_task(self._heartbeat(queue))
        tried = asyncio.Event()
        aborts = asyncio.create_task(self._listen_for_aborts(queue, tried))
        maintenance = asyncio.create_task(self._maintain(queue))
        acknowledger = asyncio.create_task(self._acknowledge(queue))
        if self.check_eviction:
            await self._warn_of_eviction(queue)
        # No run is leased before it can be aborted, unless the server is away (then the
        # fetch loop says so, and waits for it).
        await self._first_of(tried, self._stopping)
        log.info("worker %s started (concurrency %d)", self.config.id, self.config.concurrency)
        try:
            await self._fetch(queue, wake)
            await self._hand_back(queue)
        finally:
            heartbeat.cancel()
            self._stopping.set()  # also when the fetch loop ended by an error
            await aborts  # it ends by itself once stopping is set
            await maintenance  # it ends by itself once stopping is set, never mid-call
            # The acknowledger sends what is pending, then ends (never cut off mid-call).
            self._closing = True
            self._acks_waiting.set()
            now = asyncio.ensure_future(self._now.wait())
            await asyncio.wait([acknowledger, now], return_when=asyncio.FIRST_COMPLETED)
            if not acknowledger.done():  # a stop without grace: a moment for the last ones
                await asyncio.wait([acknowledger], timeout=LAST_ACKS_SECONDS)
            for waiter in (acknowledger, now):
                waiter.cancel()
            await asyncio.gather(acknowledger, now, return_exceptions=True)
            if self._acks:
                log.warning("%d result(s) not acknowledged; those tasks will run again after "
                            "their lease", len(self._acks))  # fmt: skip
            if wake is not None:
                await wake.close()
            if self._stop_wait is not None:  # its error, if any, was the outage's: said already
                await asyncio.gather(self._stop_wait, return_exceptions=True)
            if self._queue is None:
                await queue.close()
            if self._sync_queue is not None:
                self._sync_queue.close()
            log.info("worker %s stopped", config.id)

    async def _warn_of_eviction(self, queue: AsyncQueue) -> None:
        """Says once, at the start, if the server may evict task keys (eviction.py)."""
        try:
            warning = await async_eviction_warning(queue.redis)
        except OUTAGE:
            return  # the fetch loop says the server is away, and waits for it
        if warning:
            log.warning("%s", warning)

    async def _subscribe_when_reachable(self, queue: AsyncQueue) -> AsyncListener | None:
        """The wake subscription, once the server answers: a worker started before its
        server (or during an outage) waits with backoff and says so; None if stopped."""
        backoff = Backoff()
        while not self._stopping.is_set():
            try:
                return await AsyncListener(queue.executor, *queue.wake_channels).open()
            except OUTAGE as exc:  # noqa: PERF203 - a retry loop, not a hot path
                self._went_away(exc)
                await self._pause(backoff.next())
        return None

    async def _fetch(self, queue: AsyncQueue, wake: AsyncListener | None) -> None:
        backoff = Backoff()
        while not self._stopping.is_set():
            await self._fetch_or_back_off(queue, wake, backoff)

    async def _fetch_or_back_off(
        self, queue: AsyncQueue, wake: AsyncListener | None, backoff: Backoff
    ) -> None:
        try:
            if wake is not None and wake.failed:  # its node was lost: where is it now?
                await wake.reopen()
            await self._fetch_once(queue, wake)
            backoff.reset()
            self._outage.answered()
        except OUTAGE as exc:
            self._went_away(exc)
            await self._pause(backoff.next())

    def _went_away(self, exc: BaseException) -> None:
        """A call found the server unreachable (said once an outage, see OutageLog)."""
        self.outages += 1
        self._outage.failed(exc)

    async def _fetch_once(self, queue: AsyncQueue, wake: AsyncListener | None) -> None:
        free = self.config.concurrency - len(self._running)
        if free <= 0:
            self._look_again.clear()
            await self._look_again.wait()
            return
        if self._idle_pops and isinstance(queue, AsyncFairQueue):
            tasks = await self._pop_when_ready(queue, free)
            self._pops_short = len(tasks) < free
            leased = await self._start_all(queue, tasks)
        else:
            leased = await self._pop_overlapping(queue, free)
        self._idle_pops = not leased and wake is None  # then the next pop waits for work
        if leased:  # the tasks just leased start before the next pop is built and sent
            await asyncio.sleep(0)
        elif wake is not None:
            await self._idle(queue, wake)

    async def _pop_overlapping(self, queue: AsyncQueue, free: int) -> int:
        """Pops up to ``free`` tasks, and while a pop is in flight, pops again at once for
        the slots that free up meanwhile (two pops in flight at most), until none is in
        flight. With few slots (the default 10) a worker is bound by round trips: a freed
        slot waited for the pop in flight, then for its own (docs/benchmarks.md: tasks
        making one call of their own drained 10-25% faster at concurrency 10). Only while
        pops come back full: a pop short of its count says the work is running out, and a
        second pop would find nothing (after each task an idle worker picks up, say).
        Each pop's tasks start as soon as it is back; an error is raised once no pop is
        in flight, so that what the others leased has started. Returns how many tasks
        the pops leased."""
        pops = {self._pop_soon(queue, free): free}
        leased, error, short = 0, None, self._pops_short
        while pops:
            self._look_again.clear()
            if not any(pop.done() for pop in pops):
                await self._look_again.wait()
            for pop in [pop for pop in pops if pop.done()]:
                count = pops.pop(pop)
                if pop.exception() is not None:
                    error = error or pop.exception()
                    continue
                tasks = pop.result()
                short = len(tasks) < count  # the latest pop tells
                leased += await self._start_all(queue, tasks)
            more = self.config.concurrency - len(self._running) - sum(pops.values())
            if len(pops) == 1 and more > 0 and not (error or short or self._stopping.is_set()):
                pops[self._pop_soon(queue, more)] = more
        self._pops_short = short
        if error is not None:
            raise error
        return leased

    def _pop_soon(self, queue: AsyncQueue, count: int) -> asyncio.Future[list[LeasedTask]]:
        """A pop sent now, whose reply makes the fetch loop look again. It carries the
        pending acknowledgements where one namespace holds them all: one call instead
        of two, as the tasks that end free the slots the next pops fill."""
        acks = self._take_acks() if self._acks and isinstance(queue, AsyncFairQueue) else []
        pop = asyncio.ensure_future(self._pop(queue, count, acks))
        pop.add_done_callback(lambda _: self._look_again.set())
        return pop

    async def _pop(
        self, queue: AsyncQueue, count: int, acks: list[tuple[LeasedTask, Any]]
    ) -> list[LeasedTask]:
        """Pops ``count``, after finishing the tasks of ``acks`` in the same call if any
        (a queue of one namespace). Acknowledgements refused for a result are sent task
        by task, then the pop goes alone."""
        if acks and isinstance(queue, AsyncFairQueue):
            try:
                lost, leased = await queue.finish_and_pop(
                    [task for task, _ in acks],
                    [result for _, result in acks],
                    count=count,
                    assigned_users=self.config.assigned_users,
                    steal_targets=self.config.steal_targets,
                    worker_id=self.config.id,
                    lease_seconds=self.config.lease_seconds,
                    names=self._names,
                )
            except OUTAGE:
                self._acks_unsent(acks)
                raise
            except InvalidInput:  # nothing was written: a result was refused
                await self._acks_refused(queue, acks)
            else:
                self._acks_sent(acks, lost)
                return leased
        return await queue.pop(
            count=count,
            assigned_users=self.config.assigned_users,
            steal_targets=self.config.steal_targets,
            worker_id=self.config.id,
            lease_seconds=self.config.lease_seconds,
            names=self._names,
        )

    async def _start_all(self, queue: AsyncQueue, leased: list[LeasedTask]) -> int:
        """Starts the leased tasks whose function this worker has and hands the others
        back; returns how many there were."""
        foreign = [task for task in leased if self.functions.get(task.name) is None]
        if foreign:  # another deployment's tasks: back, for a worker that has them
            await queue.hand_over(
                foreign, self.config.hand_over_delay_seconds, self.config.unserved_grace_seconds
            )
        for task in leased:
            if self.functions.get(task.name) is not None:
                self._start(queue, task)
        return len(leased)

    async def _pause(self, seconds: float) -> None:
        """Waits ``seconds``, or less if the worker is asked to stop."""
        await wait_event(self._stopping, seconds)

    async def _idle_seconds(self, queue: AsyncQueue) -> float:
        """How long an idle worker waits before it pops anyway: the poll interval, or less
        if a scheduled task (a delay or a retry backoff) or a lease expiry is due sooner."""
        due = await queue.next_due()
        return (
            self.config.poll_interval_seconds
            if due is None
            else min(self.config.poll_interval_seconds, due)
        )

    async def _pop_when_ready(self, queue: AsyncFairQueue, free: int) -> list[LeasedTask]:
        """The pop of an idle worker: it waits in the server until work arrives (see
        :meth:`AsyncFairQueue.pop`), and :meth:`stop` ends the wait."""
        wait = await self._idle_seconds(queue)
        if self._stopping.is_set():
            return []
        # From here nothing is awaited until the executor has noted how many stops it
        # saw: a stop() from then on ends the wait, even before the server has it.
        self._waiting = queue
        started = time.monotonic()
        try:
            leased = await queue.pop(
                count=free,
                worker_id=self.config.id,
                lease_seconds=self.config.lease_seconds,
                wait=max(wait, MIN_IDLE_WAIT_SECONDS),
                names=self._names,
            )
        finally:
            self._waiting = None
        if not leased and time.monotonic() - started < MIN_IDLE_WAIT_SECONDS:
            # Nothing, at once: another worker took the work, or the server refused the
            # wait (an ACL without BLPOP). Not again at once: that would spin.
            await self._pause(MIN_IDLE_WAIT_SECONDS)
        return leased

    async def _idle(self, queue: AsyncQueue, wake: AsyncListener) -> None:
        """Waits for a wake message, the poll interval, the next scheduled task (a delay
        or a retry backoff) or lease expiry, or a stop, whichever comes first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + await self._idle_seconds(queue)
        while not self._stopping.is_set() and (left := deadline - loop.time()) > 0:
            if self._serves_lane(await wake.next_message(min(left, WAKE_CHECK_SECONDS))):
                while await wake.next_message(0):
                    pass  # one pop serves every wake-up that arrived meanwhile
                return

    def _serves_lane(self, message: Any) -> bool:
        """Whether a wake message names the lane of a task name this worker serves (a
        message names the lane where a tenant may now be served)."""
        if not message:
            return False
        lane = message["data"]
        return (lane.decode() if isinstance(lane, bytes) else str(lane)) in self.functions.functions

    def _start(self, queue: AsyncQueue, leased: LeasedTask) -> None:
        job = asyncio.create_task(self._execute(queue, leased))
        self._running[leased.task_id] = RunningTask(leased, job, threading.Event())

        def done(_: asyncio.Task[None]) -> None:
            self._running.pop(leased.task_id, None)
            self._look_again.set()
            # The acknowledger wakes after the fetch loop: the pop for the slot freed here
            # takes the acknowledgement first (_pop_soon), if a pop is to go.
            if self._acks:
                self._acks_waiting.set()

        job.add_done_callback(done)

    async def _execute(self, queue: AsyncQueue, leased: LeasedTask) -> None:
        started = time.perf_counter()
        try:
            around = self.hooks.around_run(leased)
        except Exception:
            log.exception("task %s: the around_run hook failed", leased.task_id,
                          extra=leased.log_fields())  # fmt: skip
            around = nullcontext()
        with around:
            outcome = await self._call(queue, self._running[leased.task_id])
        elapsed = time.perf_counter() - started
        if outcome.stopped:
            because = self._running[leased.task_id].stopped_because
            log.info("task %s: %s; its run stopped after %.3f s", leased.task_id, because,
                     elapsed, extra=leased.log_fields())  # fmt: skip
            if because == "canceled":
                self._hook(self.hooks.on_cancel, leased, elapsed)
            return
        if self.metrics:
            self.metrics.observe_task(leased.name, outcome.error is None, elapsed)
        if outcome.error is None:
            self._hook(self.hooks.on_success, leased, outcome.result, elapsed)
            self._acks.append((leased, outcome.result))  # the acknowledger wakes in done()
            return
        log.warning("task %s failed: %s", leased.task_id, outcome.error, extra=leased.log_fields())
        try:
            state = await queue.fail(leased, outcome.error, retry=outcome.retry)
            self.failed += 1
            ended = self.hooks.on_failure if state is TaskState.FAILED else self.hooks.on_retry
            self._hook(ended, leased, outcome.error, elapsed)
        except LeaseLost:
            log.warning("task %s: lease lost before its failure was recorded", leased.task_id,
                        extra=leased.log_fields())  # fmt: skip
        except OUTAGE as exc:
            self._outage.failed(exc)
            log.debug("task %s: its failure not recorded; it returns when its lease ends",
                      leased.task_id, extra=leased.log_fields())  # fmt: skip

    async def _acknowledge(self, queue: AsyncQueue) -> None:
        """Sends the acknowledgements no pop carried (:meth:`_pop_soon`): a pop carries
        those pending when it is sent, and this sends them when no pop is about to go (an
        idle worker, two pops in flight already, work running out: a pop came back short,
        a stop, a sharded queue), so that none waits for a pop that is not coming. It
        runs until the worker closes and none is left:
        results that came in while a flush was in flight at the stop are sent too (they
        were left, and their tasks ran again once their lease expired)."""
        backoff = Backoff()
        while True:
            await self._acks_waiting.wait()
            # Woken after the fetch loop (see _start's done()), and one turn later still:
            # a pop built meanwhile has taken them.
            await asyncio.sleep(0)
            try:
                await self._flush_acks(queue)
                backoff.reset()
            except OUTAGE as exc:
                if self._closing:
                    return  # the server is away at the stop: the leases bring them back
                self._outage.failed(exc)
                await asyncio.sleep(backoff.next())
            if self._closing and not self._acks:
                return

    async def _flush_acks(self, queue: AsyncQueue) -> None:
        """Sends every pending acknowledgement in one call (kept for later if it fails)."""
        batch = self._take_acks()
        if not batch:
            return
        try:
            lost = await queue.finish_many([task for task, _ in batch], [r for _, r in batch])
        except OUTAGE:
            self._acks_unsent(batch)
            raise
        except InvalidInput:  # nothing was written: a result was refused
            await self._acks_refused(queue, batch)
            return
        self._acks_sent(batch, lost)

    def _take_acks(self) -> list[tuple[LeasedTask, Any]]:
        """The pending acknowledgements, taken to be sent."""
        self._acks_waiting.clear()
        batch, self._acks = self._acks, []
        return batch

    def _acks_unsent(self, batch: list[tuple[LeasedTask, Any]]) -> None:
        """Acknowledgements taken but not sent (the server is away): pending again, first."""
        self._acks[:0] = batch
        self._acks_waiting.set()

    def _acks_sent(self, batch: list[tuple[LeasedTask, Any]], lost: list[str]) -> None:
        """Counts the tasks a call finished, and says which it found leased no more."""
        self.finished += len(batch) - len(lost)
        if lost:
            by_id = {task.task_id: task for task, _ in batch}
            for task_id in lost:
                log.warning("task %s: lease lost before its result was recorded", task_id,
                            extra=by_id[task_id].log_fields())  # fmt: skip

    async def _acks_refused(self, queue: AsyncQueue, batch: list[tuple[LeasedTask, Any]]) -> None:
        """A batch refused before anything was written, for a result that cannot be
        serialised or is over the namespace's ``max_payload_bytes``: each task is finished
        on its own, and one whose result is refused fails for good, its error saying why,
        so that one result never holds back the others (it stopped every acknowledgement
        after it before). The rest go back to the pending ones if the server goes away."""
        for position, (task, result) in enumerate(batch):
            try:
                await self._ack_alone(queue, task, result)
            except OUTAGE:  # noqa: PERF203 - the rare path of a refused batch
                self._acks_unsent(batch[position:])
                raise

    async def _ack_alone(self, queue: AsyncQueue, task: LeasedTask, result: Any) -> None:
        try:
            lost = await queue.finish_many([task], [result])
        except InvalidInput as exc:
            log.warning("task %s: its result was refused (%s); it fails", task.task_id, exc,
                        extra=task.log_fields())  # fmt: skip
            try:
                await queue.fail(task, f"result refused: {exc}", retry=False)
            except LeaseLost:
                log.warning("task %s: lease lost before its failure was recorded", task.task_id,
                            extra=task.log_fields())  # fmt: skip
                return
            self.failed += 1
            return
        self._acks_sent([(task, result)], lost)

    def _hook(self, hook: Callable[..., None], leased: LeasedTask, *args: Any) -> None:
        """Calls a hook; one that raises is logged and changes nothing for the task."""
        try:
            hook(leased, *args)
        except Exception:
            log.exception("task %s: the %s hook failed", leased.task_id, hook.__name__,
                          extra=leased.log_fields())  # fmt: skip

    async def _call(self, queue: AsyncQueue, run: RunningTask) -> Outcome:
        try:
            outcome = await self._outcome(queue, run)
        except asyncio.CancelledError:
            if not run.cancel_event.is_set() or self._stopping.is_set():
                raise  # a stop: the run is handed back
            if sys.version_info >= (3, 11):
                run.job.uncancel()  # the cancellation was the abort's, and is spent
            return Outcome(stopped=True)
        # A thread's run is not stopped: it ends when the function returns, and what it
        # returned is not wanted any more.
        return Outcome(stopped=True) if run.cancel_event.is_set() else outcome

    async def _outcome(self, queue: AsyncQueue, run: RunningTask) -> Outcome:
        leased = run.leased
        function = self.functions.get(leased.name)
        if function is None:
            return Outcome(error=f"unknown task function {leased.name!r}", retry=False)
        try:
            args, kwargs = call_arguments(leased.payload)
        except InvalidInput as exc:
            return Outcome(error=str(exc), retry=False)
        timeout = min(leased.timeout, self.config.task_timeout_seconds)
        try:
            if function.is_async:
                if function.wants_context:
                    kwargs["context"] = TaskContext(leased, queue, cancel_event=run.cancel_event)
                result = await self._within_timeout(function.func(*args, **kwargs), timeout)
            else:
                # Returns or raises only once the run has really ended (sync_runners).
                result = await self._sync.call(leased, function, args, kwargs, timeout)
        except asyncio.TimeoutError:
            return Outcome(error=f"timed out after {timeout:g} s")
        except RunFailed as exc:  # reported by a task process
            return Outcome(error=exc.message, retry=exc.retry)
        except Exception as exc:
            return Outcome(error=f"{type(exc).__name__}: {exc}")
        return Outcome(result=result)

    async def _within_timeout(self, run: Awaitable[T], seconds: float) -> T:
        """Awaits a task's coroutine, raising asyncio.TimeoutError once ``seconds`` have
        passed. ``asyncio.timeout`` does the same at ~3x the cost (a quarter of the
        worker's own CPU per task, profiled): here one timer cancels the run's asyncio
        task and marks it, which tells that cancellation from any other (a stop)."""
        job = asyncio.current_task()
        assert job is not None  # a worker's run is always its own asyncio task
        timer = asyncio.get_running_loop().call_later(seconds, self._time_out, job)
        try:
            return await run
        except asyncio.CancelledError:
            if job in self._timed_out:
                raise asyncio.TimeoutError from None
            raise
        finally:
            timer.cancel()
            if job in self._timed_out:  # also when the run swallowed the cancellation
                self._timed_out.discard(job)
                if sys.version_info >= (3, 11):
                    job.uncancel()  # the cancellation was this timer's, and is spent

    def _time_out(self, job: asyncio.Task[Any]) -> None:
        self._timed_out.add(job)
        job.cancel()

    def _sync_context(self, leased: LeasedTask) -> SyncTaskContext:
        cancel_event = self._running[leased.task_id].cancel_event
        return SyncTaskContext(leased, self._blocking_queue(), cancel_event=cancel_event)

    def _blocking_queue(self) -> Queue:
        """A blocking client for the contexts of sync functions (they run on threads)."""
        if self._sync_queue is None:
            config = self.config
            self._sync_queue = open_queue(config.redis_url, config.namespace, config.shards)
        return self._sync_queue

    async def _maintain(self, queue: AsyncQueue) -> None:
        """While the worker runs: keeps it in the namespace's registry of live workers, and
        tidies the namespace (a round runs when the last one, by any process, is
        ``maintenance_interval_seconds`` old)."""
        interval = self.config.maintenance_interval_seconds
        while True:
            try:
                await queue.register_worker(self._record(), max(10.0, 5 * interval))
                done = await queue.maintain(interval)
                rounds = 1
                # A round that hit its bound leaves the next one due at once: go on (each
                # is short), so a backlog of expired records leaves within seconds.
                while done.more and rounds < MAINTENANCE_ROUNDS and not self._stopping.is_set():
                    done = await queue.maintain(interval)
                    rounds += 1
            except OUTAGE as exc:
                self._outage.failed(exc)
            if await wait_event(self._stopping, interval):
                break
        try:
            await queue.unregister_worker(self.config.id)
        except OUTAGE:
            log.warning("could not leave the registry: the entry expires by itself")

    def _record(self) -> WorkerInfo:
        return WorkerInfo(
            worker_id=self.config.id,
            host=socket.gethostname(),
            pid=os.getpid(),
            functions=tuple(sorted(self.functions.functions)),
            concurrency=self.config.concurrency,
            in_flight=len(self._running),
            started_at=self._started_at,
        )

    async def _heartbeat(self, queue: AsyncQueue) -> None:
        """Keeps the leases of running tasks ahead of their deadline, until the worker
        stops. The stop flag ends it, not only its cancellation: redis-py may turn a
        cancellation in the middle of a call into a connection error, which the loop
        would take for an outage and go on."""
        while not await wait_event(self._stopping, self.config.lease_seconds / 3):
            await self._extend_all(queue)

    async def _extend_all(self, queue: AsyncQueue) -> None:
        try:
            for run in list(self._running.values()):
                await self._extend(queue, run)
        except OUTAGE as exc:
            self._outage.failed(exc)  # tried again at the next beat

    async def _extend(self, queue: AsyncQueue, run: RunningTask) -> None:
        try:
            await queue.extend(run.leased, self.config.lease_seconds)
        except LeaseLost:
            if run.cancel_event.is_set():
                return  # being stopped already
            # Expired and taken by another worker, or canceled while this worker did not
            # listen (an outage): either way the run must not go on.
            log.warning("task %s: lease lost, abandoning it", run.leased.task_id,
                        extra=run.leased.log_fields())  # fmt: skip
            self._stop_run(run, "lease lost")

    def _stop_run(self, run: RunningTask, because: str) -> None:
        """Stops a run whose task must not go on (canceled, or its lease lost): an async
        function is cancelled, a task process killed; a function on a thread cannot be
        stopped and sees ``context.cancelled``."""
        run.stopped_because = because
        run.cancel_event.set()
        function = self.functions.get(run.leased.name)
        on_thread = function is not None and not function.is_async
        if not (on_thread and isinstance(self._sync, ThreadRunner)):
            run.job.cancel()

    async def _listen_for_aborts(self, queue: AsyncQueue, tried: asyncio.Event) -> None:
        """Stops the runs of tasks canceled while they run, as ``cancel`` announces them
        on the ``abort`` channels; sets ``tried`` once its first subscription is made or
        has failed. Pub/sub is at most once: an abort sent while this listener is away
        (an outage) reaches the run at the next heartbeat instead (its lease is gone, so
        the extension fails)."""
        backoff = Backoff()
        while not self._stopping.is_set():
            try:
                async with AsyncListener(queue.executor, *queue.abort_channels) as listener:
                    tried.set()
                    backoff.reset()
                    while not self._stopping.is_set():
                        for task_id in await listener.next_ids(WAKE_CHECK_SECONDS):
                            self._abort(task_id)
            except OUTAGE:  # noqa: PERF203 - said by the fetch loop; again when it is back
                tried.set()
                await self._pause(backoff.next())

    @staticmethod
    async def _first_of(*events: asyncio.Event) -> None:
        """Waits until one of ``events`` is set."""
        waits = [asyncio.ensure_future(event.wait()) for event in events]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)

    def _abort(self, task_id: str) -> None:
        run = self._running.get(task_id)
        if run is None or run.cancel_event.is_set():
            return  # another worker's, or one that ended meanwhile
        log.info("task %s: canceled while it runs; stopping it", task_id,
                 extra=run.leased.log_fields())  # fmt: skip
        self._stop_run(run, "canceled")

    async def _hand_back(self, queue: AsyncQueue) -> None:
        """After a stop: wait up to the grace period, then release what still runs, except
        runs that cannot be stopped (their leases expire once this process is gone)."""
        jobs = [run.job for run in self._running.values()]
        if jobs:
            log.info("stopping: waiting up to %g s for %d running task(s)",
                     self.config.grace_seconds, len(jobs))  # fmt: skip
        if jobs and self.config.grace_seconds > 0:
            await self._grace(jobs)
        left = list(self._running.values())
        for run in left:
            run.job.cancel()
        # Ended first: a cancelled job kills its task process, so the run is over before
        # its task is handed back.
        await asyncio.gather(*(run.job for run in left), return_exceptions=True)
        unstoppable = self._sync.unstoppable()
        back = [run.leased for run in left if run.leased.task_id not in unstoppable]
        if len(back) < len(left):
            log.warning("%d task(s) still run in threads that cannot be stopped: not handed "
                        "back; they return within %g s after this process ends (their "
                        "lease)", len(left) - len(back), self.config.lease_seconds)  # fmt: skip
        if back:
            try:
                lost = await queue.release(back)
                self.handed_back = len(back) - len(lost)
                log.info("handed %d unfinished task(s) back", self.handed_back)
            except OUTAGE:
                log.warning(
                    "server unreachable: %d task(s) return when their lease ends", len(back)
                )

    async def _grace(self, jobs: list[asyncio.Task[None]]) -> None:
        """Waits until ``jobs`` end, the grace period passes or a stop without grace."""
        ended = asyncio.ensure_future(asyncio.wait(jobs))
        now = asyncio.ensure_future(self._now.wait())
        await asyncio.wait([ended, now], timeout=self.config.grace_seconds,
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        for waiter in (ended, now):
            waiter.cancel()
        await asyncio.gather(ended, now, return_exceptions=True)
