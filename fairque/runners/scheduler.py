"""The scheduler's execution cycle, run by any number of instances.

Each cycle is two round trips for up to ``batch`` due schedules. The claim script records
the instance's heartbeat and takes the lock (SET NX PX with an owner token) of each due
schedule no other instance holds, reading it under the lock; Python plans each run (cron
needs time zones); the fire script then submits the tasks, moves each schedule to its
next run and releases its lock, refusing any run another instance got to first. While
runs were claimed the next cycle starts at once, so a burst of due runs is queued batch
after batch without waiting for a poll. The locks keep instances from doing the same
work; the fire script's checks make each run submitted exactly once even when a lock
expires mid-way. The instance's record, written with every cycle's heartbeat, is what
``health_check()`` judges from outside.

:class:`TaskScheduler` and :class:`AsyncTaskScheduler` are the scheduler's API: the schedules'
clients (:mod:`fairque.scheduler.async_client`) that also run an instance. The blocking
``run()`` runs the cycle in asyncio, in any thread (``stop()`` and ``shutdown()`` may be
called from another).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import os
import signal
import socket
import threading
import time
from typing import Any

from fairque.config import QueueSettings
from fairque.engine import settings as settings_store
from fairque.engine.async_executor import AsyncExecutor
from fairque.engine.eviction import async_eviction_warning
from fairque.engine.executor import Executor
from fairque.engine.fields import MICROS
from fairque.engine.outage import OUTAGE, Backoff, OutageLog
from fairque.engine.routes import describe
from fairque.engine.waiting import wait_event
from fairque.errors import FairQueueError
from fairque.scheduler.async_client import AsyncSchedules
from fairque.scheduler.client import Schedules
from fairque.scheduler.config import SchedulerConfig
from fairque.scheduler.metrics import SchedulerMetrics
from fairque.scheduler.ops import Firing, Grant, SchedulerOps

log = logging.getLogger("fairque.scheduler")

CONTENDED_PAUSE = 0.1  # wait before looking again at a schedule another instance holds
MAINTENANCE_INTERVAL = 2.0  # seconds between maintenance rounds of the namespace


def default_instance_id() -> str:
    """``host:pid:random``: unique even when a pid is reused."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


class SchedulerRunner:
    """Runs cycles until stopped; after a stop, the cycle in progress completes, held locks
    are released and the instance is recorded as stopped."""

    def __init__(
        self,
        executor: AsyncExecutor,
        ops: SchedulerOps,
        config: SchedulerConfig,
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self.executor = executor
        self.ops = ops
        self.config = config
        self.metrics = metrics or SchedulerMetrics()
        self.instance = config.instance_id or default_instance_id()
        self._tokens = itertools.count(1)
        self._held: dict[str, str] = {}  # schedule id -> token of a lock not yet released
        self._stopping = asyncio.Event()
        self._started = time.time()
        self._maintain_at = 0.0  # monotonic time of this instance's next maintenance call

    def stop(self) -> None:
        """Asks the scheduler to stop after the current cycle (from its event loop); a
        stop asked before :meth:`run` makes it return at once."""
        self._stopping.set()

    def _record(self, state: str) -> dict[str, Any]:
        return {
            "state": state,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": self._started,
            "poll_interval": self.config.poll_interval,  # how often it beats, for health
            **self.metrics.summary(),
        }

    async def check_server(self) -> None:
        """Raises :class:`FairQueueError` naming the server if it does not answer."""
        try:
            await self.executor.execute(self.ops.read([]))
        except OUTAGE as exc:
            address = describe(self.executor.route)
            raise FairQueueError(f"cannot reach the server at {address}: {exc}") from None
        try:  # the cluster's every node: one away (not the schedules') does not stop a start
            warning = await async_eviction_warning(self.executor.client)
        except OUTAGE:
            return
        if warning:
            log.warning("%s", warning)

    async def run(self, handle_signals: bool = False) -> None:
        """Runs until :meth:`stop` (or SIGTERM / SIGINT with ``handle_signals``). Checks
        the server first (:class:`FairQueueError` if it does not answer); later outages
        are waited out with backoff."""
        await self.check_server()
        signals = (signal.SIGTERM, signal.SIGINT) if handle_signals else ()
        loop = asyncio.get_running_loop()
        for signum in signals:
            loop.add_signal_handler(signum, self.stop)
        try:
            await self._loop()
        finally:
            for signum in signals:
                loop.remove_signal_handler(signum)
            self._stopping.clear()  # it may run again

    async def _loop(self) -> None:
        backoff = Backoff()
        outage = OutageLog(log, describe(self.executor.route), "schedules wait for it")
        self.metrics.running = True
        log.info("scheduler %s started", self.instance)
        try:
            while not self._stopping.is_set():
                try:
                    pause = await self.cycle()
                    backoff.reset()
                    outage.answered()
                except OUTAGE as exc:
                    self.metrics.outages += 1
                    pause = backoff.next()
                    outage.failed(exc)
                await wait_event(self._stopping, pause)
        finally:
            self.metrics.running = False
            await self._shut_down()

    async def _shut_down(self) -> None:
        try:
            await self._release_held()
            stopped = self.ops.record(
                self.instance, self._record("stopped"), self.config.instance_ttl
            )
            await self.executor.execute(stopped)
        except OUTAGE as exc:
            log.warning("could not record the stop (%s); held locks expire by themselves", exc)
        log.info("scheduler %s stopped", self.instance)

    async def _release_held(self) -> None:
        if self._held:
            await self.executor.execute(self.ops.unlock(self._held))
            self._held.clear()

    async def cycle(self) -> float:
        """Handles the due schedules once (at most ``batch`` of them); returns how long
        to wait before the next cycle."""
        await self._release_held()  # left over from a cycle the server went away in
        if time.monotonic() >= self._maintain_at:
            self._maintain_at = time.monotonic() + MAINTENANCE_INTERVAL
            await self.executor.execute(self.ops.maintain(MAINTENANCE_INTERVAL))
        config = self.config
        token = f"{self.instance}:{next(self._tokens)}"
        started = time.perf_counter()
        claim = await self.executor.execute(
            self.ops.claim(self.instance, self._record("running"), token, config)
        )
        self.metrics.lock_time.append(time.perf_counter() - started)
        self.metrics.lock_busy += claim.busy
        self._held.update((grant.schedule_id, token) for grant in claim.grants)
        await self._fire(claim.grants)
        self.metrics.cycles += 1
        self.metrics.last_cycle = time.monotonic()
        self.metrics.last_cycle_at = time.time()
        if claim.grants:
            return 0.0  # look again at once: more may be due, and the earliest has moved
        if claim.busy:  # due, but held by another instance (or a dead one's lock)
            return min(self.config.poll_interval, CONTENDED_PAUSE)
        if claim.earliest is None:
            return self.config.poll_interval
        return min(self.config.poll_interval, max(0.0, (claim.earliest - claim.now) / MICROS))

    async def _fire(self, grants: list[Grant]) -> None:
        """Submits the claimed runs in one call; a run that cannot be built, or that the
        server refuses, is recorded as a failed submission (which releases its lock)."""
        firings = [firing for grant in grants if (firing := await self._firing(grant))]
        if not firings:
            return
        outcomes = await self.executor.execute(self.ops.fire(firings))
        refused: list[tuple[Grant, FairQueueError]] = []
        for firing, outcome in zip(firings, outcomes, strict=True):
            plan = firing.plan
            if isinstance(outcome, FairQueueError):  # refused by the server: lock still held
                refused.append((firing.grant, outcome))
                continue
            del self._held[firing.grant.schedule_id]  # released by the fire script
            if outcome is None:
                self.metrics.stale += 1
            elif plan.submit:
                self.metrics.submission((outcome - plan.run_at) / MICROS)
            else:
                self.metrics.skipped += 1
        for grant, error in refused:
            await self._failed(grant, error)

    async def _firing(self, grant: Grant) -> Firing | None:
        try:
            return self.ops.firing(grant)
        except FairQueueError as exc:  # our validation, or an unreadable record
            await self._failed(grant, exc)
            return None

    async def _failed(self, grant: Grant, exc: FairQueueError) -> None:
        self.metrics.failure()
        log.warning("schedule %s: submission failed: %s", grant.schedule_id, exc)
        failed = self.ops.failed(grant, grant.run_at, str(exc), self.config)
        state = await self.executor.execute(failed)
        del self._held[grant.schedule_id]  # released by the failed script
        log.warning("schedule %s is %s", grant.schedule_id, state and state.value)


def _current_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class TaskScheduler(Schedules):
    """Cron and interval schedules of one queue namespace.

    >>> scheduler = TaskScheduler()  # doctest: +SKIP
    >>> scheduler.add_schedule(cron="0 7 * * mon-fri", timezone="Asia/Tokyo",
    ...     task={"name": "daily_report", "user_id": "alice", "args": [3]})  # doctest: +SKIP
    >>> scheduler.run()  # submits due runs until SIGTERM  # doctest: +SKIP

    Or in a thread of a larger program, stopped from another:

    >>> threading.Thread(target=scheduler.run).start()  # doctest: +SKIP
    >>> scheduler.shutdown()  # stops it and waits until it has ended  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str | None = None,
        namespace: str = "default",
        *,
        config: SchedulerConfig | None = None,
        settings: QueueSettings | None = None,
        executor: Executor | None = None,
    ) -> None:
        super().__init__(url, namespace, config=config, settings=settings, executor=executor)
        self._running: tuple[asyncio.AbstractEventLoop, SchedulerRunner] | None = None
        self._guard = threading.Lock()  # _running and _stop_asked, across threads
        self._stop_asked = False
        self._ended = threading.Event()  # set while no run() is in progress
        self._ended.set()

    def run(self, handle_signals: bool = True) -> None:
        """Submits due runs until :meth:`stop` / :meth:`shutdown` (from any thread) or,
        in the main thread with ``handle_signals``, SIGTERM / SIGINT; then finishes the
        cycle, releases its locks and records the instance as stopped. Raises
        :class:`FairQueueError` naming the server if it does not answer at start."""
        # Signal handlers can only be installed in the main thread.
        signals = handle_signals and threading.current_thread() is threading.main_thread()

        async def main() -> None:
            executor = AsyncExecutor.connect(self.url)
            settings_store.write_on_first_use(executor, self.ops.namespace, self.settings)
            try:
                runner = SchedulerRunner(executor, self.ops, self.config, self.metrics)
                with self._guard:
                    self._running = asyncio.get_running_loop(), runner
                    if self._stop_asked:
                        runner.stop()
                await runner.run(signals)
            finally:
                with self._guard:
                    self._running = None
                    self._stop_asked = False
                await executor.close()

        self._ended.clear()
        try:
            asyncio.run(main())
        finally:
            self._ended.set()

    def stop(self) -> None:
        """Stops :meth:`run` (in any thread) after its current cycle; a stop asked before
        ``run()`` has begun makes it return at once."""
        with self._guard:
            self._stop_asked = True
            if self._running is not None:
                loop, runner = self._running
                loop.call_soon_threadsafe(runner.stop)

    def shutdown(self, timeout: float | None = None) -> bool:
        """Stops :meth:`run` and waits until it has ended (its locks released, the
        instance recorded as stopped); False if it still runs after ``timeout`` s."""
        self.stop()
        running = self._running
        if running is not None and running[0] is _current_loop():
            return False  # called from inside run() itself: it ends once this returns
        return self._ended.wait(timeout)


class AsyncTaskScheduler(AsyncSchedules):
    """:class:`TaskScheduler` for asyncio: the same methods, as coroutines.

    >>> scheduler = AsyncTaskScheduler()  # doctest: +SKIP
    >>> await scheduler.add_schedule(interval=30, task={"name": "ping", "user_id": "ops"})
    ... # doctest: +SKIP
    >>> await scheduler.run()  # until scheduler.stop()  # doctest: +SKIP
    """

    @functools.cached_property
    def runner(self) -> SchedulerRunner:
        """The execution cycle that :meth:`run` drives."""
        return SchedulerRunner(self.executor, self.ops, self.config, self.metrics)

    @functools.cached_property
    def _ended(self) -> asyncio.Event:
        ended = asyncio.Event()  # set while no run() is in progress
        ended.set()
        return ended

    async def run(self, handle_signals: bool = False) -> None:
        """Submits due runs until :meth:`stop` / :meth:`shutdown` (or a signal, with
        ``handle_signals``). Raises :class:`FairQueueError` naming the server if it does
        not answer at start."""
        self._ended.clear()
        try:
            await self.runner.run(handle_signals)
        finally:
            self._ended.set()

    def stop(self) -> None:
        """Stops :meth:`run` after its current cycle; a stop asked before ``run()`` has
        begun makes it return at once."""
        self.runner.stop()

    async def shutdown(self, timeout: float | None = None) -> bool:
        """Stops :meth:`run` and waits until it has ended (its locks released, the
        instance recorded as stopped); False if it still runs after ``timeout`` s."""
        self.stop()
        if timeout is None:
            await self._ended.wait()
            return True
        return await wait_event(self._ended, timeout)
