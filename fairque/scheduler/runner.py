"""The scheduler's execution cycle (seed 002, section 3), run by any number of instances.

Each cycle reads the due schedules (and records the instance's heartbeat), then for
each one takes its lock (SET NX PX with an owner token), plans the run in Python (cron
needs time zones) and fires it: one script submits the task, moves the schedule to its
next run and releases the lock, refusing if another instance got there first. The lock
keeps instances from doing the same work; the fire script's checks make each run
submitted exactly once even when a lock expires mid-way. The instance's record, written
with every cycle's heartbeat, is what ``health_check()`` judges from outside.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import random
import signal
import socket
import time
from typing import Any

from fairque.engine.calls import MICROS
from fairque.engine.executor import AsyncExecutor
from fairque.engine.outage import OUTAGE, Backoff
from fairque.engine.waiting import wait_event
from fairque.errors import FairQueueError
from fairque.scheduler.config import SchedulerConfig
from fairque.scheduler.metrics import SchedulerMetrics
from fairque.scheduler.ops import Grant, SchedulerOps, plan_run

log = logging.getLogger("fairque.scheduler")

CONTENDED_PAUSE = 0.1  # wait before looking again at a schedule another instance holds
MAINTENANCE_INTERVAL = 2.0  # seconds between maintenance rounds of the namespace


def default_instance_id() -> str:
    """``host:pid:random``: unique even when a pid is reused."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(3).hex()}"


def server_address(client: Any) -> str:
    """``host:port`` of the server a redis-py client (blocking or asyncio) connects to,
    a cluster's startup nodes, or a socket path: for error messages."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        options = pool.connection_kwargs
        if "path" in options:
            return str(options["path"])
        return f"{options.get('host', 'localhost')}:{options.get('port', 6379)}"
    nodes = getattr(getattr(client, "nodes_manager", None), "startup_nodes", None) or {}
    return ",".join(nodes) or "(unknown)"


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
            address = server_address(self.executor.client)
            raise FairQueueError(f"cannot reach the server at {address}: {exc}") from None

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
        self.metrics.running = True
        log.info("scheduler %s started", self.instance)
        try:
            while not self._stopping.is_set():
                try:
                    pause = await self.cycle()
                    backoff.reset()
                except OUTAGE as exc:
                    self.metrics.outages += 1
                    pause = backoff.next()
                    log.warning("server unreachable (%s); retrying in %.1f s", exc, pause)
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
        for schedule_id, token in list(self._held.items()):
            await self.executor.execute(self.ops.unlock(schedule_id, token))
            del self._held[schedule_id]

    async def cycle(self) -> float:
        """Handles the due schedules once; returns how long to wait before the next cycle."""
        await self._release_held()  # left over from a cycle the server went away in
        if time.monotonic() >= self._maintain_at:
            self._maintain_at = time.monotonic() + MAINTENANCE_INTERVAL
            await self.executor.execute(self.ops.maintain(MAINTENANCE_INTERVAL))
        record = self._record("running")
        config = self.config
        due = await self.executor.execute(
            self.ops.due(self.instance, record, config.batch, config.instance_ttl)
        )
        contended = False
        # In its own random order, so that instances seldom reach for the same lock.
        random.shuffle(due.schedules)
        for schedule_id, _next in due.schedules:
            contended |= await self._handle(schedule_id)
        self.metrics.cycles += 1
        self.metrics.last_cycle = time.monotonic()
        if contended:
            return min(self.config.poll_interval, CONTENDED_PAUSE)
        if due.schedules:
            return 0.0  # look again at once: more may be due, and the earliest has moved
        if due.earliest is None:
            return self.config.poll_interval
        return min(self.config.poll_interval, max(0.0, (due.earliest - due.now) / MICROS))

    async def _handle(self, schedule_id: str) -> bool:
        """Submits one due run if this instance gets its lock; True if another had it."""
        token = f"{self.instance}:{next(self._tokens)}"
        started = time.perf_counter()
        grant = await self.executor.execute(
            self.ops.lock(schedule_id, token, self.config.lock_timeout)
        )
        self.metrics.lock_time.append(time.perf_counter() - started)
        if grant is True:  # another instance holds the lock
            self.metrics.lock_busy += 1
            return True
        if grant is False:  # no longer due: another instance has just handled it
            return False
        self._held[schedule_id] = token
        await self._fire(grant)
        del self._held[schedule_id]  # every path of _fire released it, unless it raised
        return False

    async def _fire(self, grant: Grant) -> None:
        try:
            plan = plan_run(grant)
            submitted_at = await self.executor.execute(self.ops.fire(grant, plan))
        except FairQueueError as exc:  # refused: the server, our validation, or a bad record
            self.metrics.failure()
            log.warning("schedule %s: submission failed: %s", grant.schedule_id, exc)
            failed = self.ops.failed(grant, grant.run_at, str(exc), self.config)
            state = await self.executor.execute(failed)
            log.warning("schedule %s is %s", grant.schedule_id, state and state.value)
            return
        if submitted_at is None:
            self.metrics.stale += 1
        elif plan.submit:
            self.metrics.submission((submitted_at - plan.run_at) / MICROS)
        else:
            self.metrics.skipped += 1
