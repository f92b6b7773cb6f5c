"""What keeps a worker in good standing with the server while it runs: the leases of its
runs extended ahead of their deadline (the heartbeat), its entry in the namespace's
registry of live workers, with the namespace's tidying, and the ``abort`` channels,
on which ``cancel`` names the running tasks it canceled.

The registry entry and the tidying (the namespace's maintenance round, when one is due)
go in one call (``upkeep``): a busy worker makes it every maintenance interval with its
record; an idle one, once before each wait for work (the fetch loop's), which moves only
its entry's expiry. A worker that waits in its pop makes that call only before its first
wait: each wait's pop that finds nothing is the upkeep of the next (``idle_pop``). So an
idle worker costs the server one call and one wait per poll interval (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Any

from fairque.engine.notify import AsyncListener
from fairque.engine.outage import OUTAGE, SETTLE_SECONDS, Backoff, OutageLog
from fairque.engine.waiting import wait_event
from fairque.errors import LeaseLost
from fairque.queue.async_client import AsyncQueue
from fairque.queue.calls.maintenance import MAINTENANCE_ROUNDS
from fairque.queue.models import WorkerInfo, WorkerUpkeep
from fairque.runners.fair_worker.config import WAKE_CHECK_SECONDS, WorkerConfig
from fairque.runners.fair_worker.functions import Registry
from fairque.runners.fair_worker.runs import RunningTask, Runs

log = logging.getLogger("fairque.worker")


class Upkeep:
    """A worker's leases, registry entry and abort listener, kept until it stops."""

    def __init__(
        self,
        config: WorkerConfig,
        functions: Registry,
        runs: Runs,
        outage: OutageLog,
        stopping: asyncio.Event,
    ) -> None:
        self.config = config
        self.functions = functions
        self.runs = runs
        self.outage = outage
        self.stopping = stopping
        self.started_at = time.time()
        interval = config.maintenance_interval_seconds
        # The registry entry outlives a wait for work by a third of the wait at least (see
        # idle_wait): a call that ends a wait late by less keeps it registered, and one
        # later still finds it gone and registers it again (after_idle_pop).
        poll = config.poll_interval_seconds
        self.registry_ttl = min(3600.0, max(10.0, 5 * interval, poll * 4 / 3))
        self.names: tuple[str, ...] = ()  # the task names the worker serves, set by the run
        # Set while the fetch loop waits for work and keeps the worker registered itself
        # (idle); the maintenance loop beats again once it is cleared (busy).
        self.idle = False
        self._in_flight_written = -1  # the tasks in flight of the record last written
        self._listen_again = asyncio.Event()  # set by busy(): subscribe to aborts again

    def idle_wait(self, found: WorkerUpkeep) -> float:
        """How long an idle worker may wait after its upkeep found ``found``: the poll
        interval, less if work comes due sooner, and at most three quarters of its
        registry entry's time to live."""
        longest = self._longest_wait()
        if self.outage.since is not None:  # back from an outage: say so soon, not a poll later
            longest = min(longest, SETTLE_SECONDS)
        return longest if found.next_due is None else min(longest, found.next_due)

    def _longest_wait(self) -> float:
        return min(self.config.poll_interval_seconds, self.registry_ttl * 3 / 4)

    async def before_idle_wait(self, queue: AsyncQueue) -> WorkerUpkeep:
        """The upkeep of a worker about to wait for work: keeps it registered (its record
        written again if its tasks in flight changed), tidies the namespace if a round
        is due, and says when work comes due."""
        found = await self._upkeep(queue, rewrite=False, longest_wait=self._longest_wait())
        self.idle = True
        return found

    async def _upkeep(
        self, queue: AsyncQueue, rewrite: bool, longest_wait: float | None = None
    ) -> WorkerUpkeep:
        """One upkeep call (its record written with ``rewrite`` or when its tasks in
        flight changed; ``longest_wait``: see ``AsyncQueue.upkeep``), with the maintenance
        round if one is due, and the rounds after it if it hit its bound."""
        record = self._record()
        rewrite = rewrite or record.in_flight != self._in_flight_written
        found = await queue.upkeep(
            record, self.registry_ttl, rewrite=rewrite, longest_wait=longest_wait,
            names=self.names or None, round_interval=self.config.maintenance_interval_seconds,
        )  # fmt: skip
        self._in_flight_written = record.in_flight
        self.outage.answered()  # said now, not after the wait that follows
        if found.round_due:
            await self._rounds(queue, 1)
        return found

    async def _rounds(self, queue: AsyncQueue, made: int) -> None:
        """Maintenance rounds after ``made`` of them, while each hits its bound (the next
        is then due at once: each is short, so a backlog of expired records leaves
        within seconds), :data:`MAINTENANCE_ROUNDS` in all at most."""
        interval = self.config.maintenance_interval_seconds
        more = True
        while more and made < MAINTENANCE_ROUNDS and not self.stopping.is_set():
            more = (await queue.maintain(interval)).more
            made += 1

    def idle_pop_upkeep(self) -> dict[str, Any]:
        """The upkeep an idle pop makes when it leases nothing (the keyword arguments of
        ``AsyncFairQueue.idle_pop``)."""
        return {
            "worker_id": self.config.id,
            "ttl": self.registry_ttl,
            "longest_wait": self._longest_wait(),
            "round_interval": self.config.maintenance_interval_seconds,
        }

    async def after_idle_pop(self, queue: AsyncQueue, found: WorkerUpkeep) -> WorkerUpkeep | None:
        """What the upkeep of an idle pop found, for the next wait (:meth:`idle_wait`), after
        the maintenance rounds that follow the one it ran if that hit its bound; None
        when the next wait needs an upkeep call of its own: the worker is not registered
        (the idle pop does not register it), or its record changed (its tasks in
        flight)."""
        self.outage.answered()
        if found.round_due:
            await self._rounds(queue, 1)
        if not found.registered or len(self.runs.running) != self._in_flight_written:
            return None
        return found

    async def heartbeat(self, queue: AsyncQueue) -> None:
        """Keeps the leases of running tasks ahead of their deadline, until the worker
        stops. The stop flag ends it, not only its cancellation: redis-py may turn a
        cancellation in the middle of a call into a connection error, which the loop
        would take for an outage and go on."""
        while not await wait_event(self.stopping, self.config.lease_seconds / 3):
            await self._extend_all(queue)

    async def _extend_all(self, queue: AsyncQueue) -> None:
        try:
            for run in list(self.runs.running.values()):
                await self._extend(queue, run)
        except OUTAGE as exc:
            self.outage.failed(exc)  # tried again at the next beat

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
            self.runs.stop(run, "lease lost")

    async def maintain(self, queue: AsyncQueue) -> None:
        """While the worker runs: keeps it in the namespace's registry of live workers, and
        tidies the namespace (a round runs when the last one, by any process, is
        ``maintenance_interval_seconds`` old), every interval while it is busy: an idle
        worker's fetch loop does both before each wait (:meth:`before_idle_wait`)."""
        interval = self.config.maintenance_interval_seconds
        # The functions' declared defaults, set once (again at the next beat after an outage).
        declared = self.functions.declared_defaults()
        while True:
            try:
                while declared:
                    await queue.set_limits(declared[0][0], **declared[0][1])
                    declared.pop(0)
                if not self.idle:
                    await self._upkeep(queue, rewrite=True)
            except OUTAGE as exc:
                self.outage.failed(exc)
            if await wait_event(self.stopping, interval):
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
            in_flight=len(self.runs.running),
            started_at=self.started_at,
        )

    def busy(self) -> None:
        """The fetch loop leased tasks: the worker is no longer idle (its maintenance loop
        beats again, and it listens for aborts again if it had stopped)."""
        self.idle = False
        self._listen_again.set()

    async def listen_for_aborts(self, queue: AsyncQueue, tried: asyncio.Event) -> None:
        """Stops the runs of tasks canceled while they run, as ``cancel`` announces them
        on the ``abort`` channels; sets ``tried`` once its first subscription is made or
        has failed. Pub/sub is at most once: an abort sent while this listener is away
        (an outage) reaches the run at the next heartbeat instead (its lease is gone, so
        the extension fails). A worker idle for a poll interval, with no run, lets its
        subscription go (a connection costs the server a little every second) and makes
        it again when it leases tasks: an abort of one of those sent before the
        subscription is back reaches its run at the next heartbeat too."""
        backoff = Backoff()
        while not self.stopping.is_set():
            try:
                async with AsyncListener(queue.executor, *queue.abort_channels) as listener:
                    tried.set()
                    backoff.reset()
                    await self._abort_runs(listener)
                # Idle: the connections left open by its start and its last runs go too.
                await queue.executor.close_idle_connections()
            except OUTAGE:
                tried.set()
                await wait_event(self.stopping, backoff.next())
                continue
            while not (self._listen_again.is_set() or self.stopping.is_set()):
                await wait_event(self._listen_again, WAKE_CHECK_SECONDS)

    async def _abort_runs(self, listener: AsyncListener) -> None:
        """Aborts the runs ``listener`` names until the worker stops, or has been idle
        with no run for a poll interval."""
        loop = asyncio.get_running_loop()
        idle_since: float | None = None
        while not self.stopping.is_set():
            for task_id in await listener.next_ids(WAKE_CHECK_SECONDS):
                self.runs.abort(task_id)
            # A lease since the last look counts even if its run began and ended between
            # two looks: else the subscription, once gone, would come back at once.
            leased = self._listen_again.is_set()
            self._listen_again.clear()
            if leased or self.runs.running or not self.idle:
                idle_since = None
            elif idle_since is None:
                idle_since = loop.time()
            elif loop.time() - idle_since >= self.config.poll_interval_seconds:
                return
