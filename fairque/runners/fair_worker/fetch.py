"""A worker's fetch loop: it pops as many tasks as it has free slots (slots that free up
while a pop is in flight get a second one at once) and starts them, and when idle waits
for work so a new task is picked up at once rather than at the next poll. A worker whose
queue is one namespace, and which names no tenants, waits in its pop
(``idle_pop``), which the server runs the moment work arrives; any other waits on
the namespace's wake channel, then pops. Before each wait the worker's upkeep keeps it
registered, tidies the namespace if due, and says when work comes due without a push
(a delay, a retry backoff, a lease running out, a rate window opening): the wait ends
then, or after the poll interval, a safety net. A pop carries the pending
acknowledgements when the queue can finish and pop in one call (``finish_and_pop``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from fairque.engine.notify import AsyncListener
from fairque.engine.outage import OUTAGE, Backoff, OutageLog
from fairque.engine.sending import async_ended_after
from fairque.engine.waiting import wait_event
from fairque.errors import InvalidInput
from fairque.queue.async_client import AsyncQueue
from fairque.queue.models import LeasedTask, WorkerUpkeep
from fairque.runners.fair_worker.acks import Ack, Acknowledgements
from fairque.runners.fair_worker.config import WAKE_CHECK_SECONDS, WorkerConfig
from fairque.runners.fair_worker.counts import Counts
from fairque.runners.fair_worker.functions import Registry
from fairque.runners.fair_worker.runs import Runs
from fairque.runners.fair_worker.upkeep import Upkeep

log = logging.getLogger("fairque.worker")

MIN_IDLE_WAIT_SECONDS = 0.005  # an idle pop waits at least this long: no busy loop
# A wait for work lasting this long closes the connections no call holds (its own stays):
# an open connection costs the server ~3k instructions a second (Valkey's per-client
# cron), making one again ~30k (accept, the client's record made and freed), as much as
# ~10 s open. A wait that follows one that brought nothing closes them at once: the
# worker stays idle, and the connection left over is the one that ended that wait.
SPARE_CONNECTIONS_SECONDS = 5.0
RECONNECT_SECONDS = 10.0


class Fetcher:
    """Leases the tasks of one worker and starts their runs."""

    def __init__(  # noqa: PLR0917 - the worker's parts a fetch reaches
        self,
        config: WorkerConfig,
        functions: Registry,
        runs: Runs,
        acks: Acknowledgements,
        upkeep: Upkeep,
        counts: Counts,
        outage: OutageLog,
        stopping: asyncio.Event,
        look_again: asyncio.Event,
    ) -> None:
        self.config = config
        self.functions = functions
        self.runs = runs
        self.acks = acks
        self.upkeep = upkeep
        self.counts = counts
        self.outage = outage
        self.stopping = stopping
        # Set when the fetch loop should look again: a slot freed, a pop came back, a stop.
        self.look_again = look_again
        self.names: tuple[str, ...] = ()  # the task names its pops ask for, set by the run
        self._idle_pops = False  # the last pop found nothing: the next one waits for work
        self._pops_short = True  # the last pop leased fewer than it asked for
        self._waiting: AsyncQueue | None = None  # the queue of the pop waiting now
        # What the last idle pop's upkeep found, for the wait that follows it at once.
        self._upkept: WorkerUpkeep | None = None
        self._stop_wait: asyncio.Future[None] | None = None  # stop_waiting() ending that wait

    def waits_in_pop(self, queue: AsyncQueue) -> bool:
        """True when the idle wait can be the pop's own: one namespace (one server or
        one cluster node), and no named tenants (a worker that cannot take the work a
        wake-up announces would wake again at once, for ever)."""
        return (
            queue.one_namespace is not None
            and self.config.assigned_users is None
            and self.config.steal_targets is None
        )

    def stop_waiting(self) -> None:
        """Ends the wait of an idle pop, if one waits: it pops now, then the loop sees the
        stop."""
        if self._waiting is not None:
            self._stop_wait = asyncio.ensure_future(self._waiting.stop_waiting())

    async def close(self) -> None:
        """Waits for the end of a wait that :meth:`stop_waiting` ended."""
        if self._stop_wait is not None:  # its error, if any, was the outage's: said already
            await asyncio.gather(self._stop_wait, return_exceptions=True)

    async def subscribe_when_reachable(self, queue: AsyncQueue) -> AsyncListener | None:
        """The wake subscription, once the server answers: a worker started before its
        server (or during an outage) waits with backoff and says so; None if stopped."""
        backoff = Backoff()
        while not self.stopping.is_set():
            try:
                return await AsyncListener(queue.executor, *queue.wake_channels).open()
            except OUTAGE as exc:  # noqa: PERF203 - a retry loop, not a hot path
                self._went_away(exc)
                await wait_event(self.stopping, backoff.next())
        return None

    async def fetch(self, queue: AsyncQueue, wake: AsyncListener | None) -> None:
        """Fetches until the worker stops."""
        backoff = Backoff()
        while not self.stopping.is_set():
            await self._fetch_or_back_off(queue, wake, backoff)

    async def _fetch_or_back_off(
        self, queue: AsyncQueue, wake: AsyncListener | None, backoff: Backoff
    ) -> None:
        try:
            if wake is not None and wake.failed:  # its node was lost: where is it now?
                await wake.reopen()
            await self._fetch_once(queue, wake)
            backoff.reset()
            self.outage.answered()
        except OUTAGE as exc:
            self._went_away(exc)
            await wait_event(self.stopping, backoff.next())

    def _went_away(self, exc: BaseException) -> None:
        """A call found the server unreachable (said once an outage, see OutageLog)."""
        self.counts.outages += 1
        self.outage.failed(exc)

    async def _fetch_once(self, queue: AsyncQueue, wake: AsyncListener | None) -> None:
        free = self.config.concurrency - len(self.runs.running)
        if free <= 0:
            self.look_again.clear()
            await self.look_again.wait()
            return
        if self._idle_pops:  # only without a wake subscription: the pop waits
            tasks = await self._pop_when_ready(queue, free)
            self._pops_short = len(tasks) < free
            leased = await self._start_all(queue, tasks)
        else:
            leased = await self._pop_overlapping(queue, free)
        self._idle_pops = not leased and wake is None  # then the next pop waits for work
        if leased:  # the tasks just leased start before the next pop is built and sent
            self.upkeep.busy()
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
            self.look_again.clear()
            if not any(pop.done() for pop in pops):
                await self.look_again.wait()
            for pop in [pop for pop in pops if pop.done()]:
                count = pops.pop(pop)
                if pop.exception() is not None:
                    error = error or pop.exception()
                    continue
                tasks = pop.result()
                short = len(tasks) < count  # the latest pop tells
                leased += await self._start_all(queue, tasks)
            more = self.config.concurrency - len(self.runs.running) - sum(pops.values())
            if len(pops) == 1 and more > 0 and not (error or short or self.stopping.is_set()):
                pops[self._pop_soon(queue, more)] = more
        self._pops_short = short
        if error is not None:
            raise error
        return leased

    def _pop_soon(self, queue: AsyncQueue, count: int) -> asyncio.Future[list[LeasedTask]]:
        """A pop sent now, whose reply makes the fetch loop look again. It carries the
        pending acknowledgements where one namespace holds them all: one call instead
        of two, as the tasks that end free the slots the next pops fill."""
        acks = self.acks.take() if self.acks.pending and queue.one_namespace is not None else []
        pop = asyncio.ensure_future(self._pop(queue, count, acks))
        pop.add_done_callback(lambda _: self.look_again.set())
        return pop

    async def _pop(self, queue: AsyncQueue, count: int, acks: list[Ack]) -> list[LeasedTask]:
        """Pops ``count``, after finishing the tasks of ``acks`` in the same call if any
        (a queue of one namespace). Acknowledgements refused for a result are sent task
        by task, then the pop goes alone."""
        one_namespace = queue.one_namespace
        lease: dict[str, Any] = {  # what each pop asks for, after its count
            "assigned_users": self.config.assigned_users,
            "steal_targets": self.config.steal_targets,
            "worker_id": self.config.id,
            "lease_seconds": self.config.lease_seconds,
            "names": self.names,
        }
        if acks and one_namespace is not None:
            try:
                lost, leased = await one_namespace.finish_and_pop(
                    [task for task, _ in acks], [result for _, result in acks], count=count, **lease
                )
            except OUTAGE:
                self.acks.unsent(acks)
                raise
            except InvalidInput:  # nothing was written: a result was refused
                await self.acks.refused(queue, acks)
            else:
                self.acks.sent(acks, lost)
                return leased
        return await queue.pop(count=count, **lease)

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
                self.runs.start(queue, task)
        return len(leased)

    async def _pop_when_ready(self, queue: AsyncQueue, free: int) -> list[LeasedTask]:
        """The pop of an idle worker: after its upkeep, it waits in the server until work
        arrives or comes due (see :meth:`AsyncFairQueue.idle_pop`, one namespace only),
        and :meth:`stop_waiting` ends the wait. A pop that leases nothing is the upkeep
        of the next wait: a worker that stays idle makes one call a wait."""
        one_namespace = queue.one_namespace
        assert one_namespace is not None, "waits_in_pop: one namespace"
        found, self._upkept = self._upkept, None
        still_idle = found is not None  # the wait before this one brought nothing
        if found is None:  # the first wait since the worker was busy (or the server away)
            found = await self.upkeep.before_idle_wait(queue)
        wait = self.upkeep.idle_wait(found)
        if self.stopping.is_set():
            return []
        idle = self.upkeep.idle_pop_upkeep()
        # From here nothing is awaited until the executor has noted how many stops it
        # saw: a stop() from then on ends the wait, even before the server has it.
        self._waiting = queue
        started = time.monotonic()
        try:
            async with self._closing_spare_connections(queue, wait, still_idle):
                leased, upkept = await one_namespace.idle_pop(
                    max(wait, MIN_IDLE_WAIT_SECONDS),
                    free,
                    lease_seconds=self.config.lease_seconds,
                    names=self.names or None,
                    **idle,
                )
        finally:
            self._waiting = None
        if upkept is not None:
            self._upkept = await self.upkeep.after_idle_pop(queue, upkept)
        if not leased and time.monotonic() - started < MIN_IDLE_WAIT_SECONDS:
            # Nothing, at once: another worker took the work, or the server refused the
            # wait (an ACL without BLPOP). Not again at once: that would spin.
            await wait_event(self.stopping, MIN_IDLE_WAIT_SECONDS)
        return leased

    async def _idle(self, queue: AsyncQueue, wake: AsyncListener) -> None:
        """Waits for a wake message, the next scheduled task (a delay or a retry backoff),
        a lease expiry or a rate window opening, or a stop, whichever comes first. A
        worker that takes any tenant's work pops at once when its upkeep finds a lane it
        serves with work (a wake message may be lost while its subscription is away);
        one that names tenants pops after each poll interval instead (the lane's work
        may not be its tenants')."""
        loop = asyncio.get_running_loop()
        any_tenant = self.config.assigned_users is None and self.config.steal_targets is None
        still_idle = False  # a wait before this one brought nothing
        while not self.stopping.is_set():
            found = await self.upkeep.before_idle_wait(queue)
            if found.ready and any_tenant:
                return
            wait = self.upkeep.idle_wait(found)
            deadline = loop.time() + wait
            async with self._closing_spare_connections(queue, wait, still_idle):
                while not self.stopping.is_set() and (left := deadline - loop.time()) > 0:
                    message = await wake.next_message(min(left, WAKE_CHECK_SECONDS))
                    if self._serves_lane(message):
                        while await wake.next_message(0):
                            pass  # one pop serves every wake-up that arrived meanwhile
                        return
            if (found.next_due is not None and found.next_due <= wait) or not any_tenant:
                return  # work came due (the pop makes it ready), or the poll for tenants
            still_idle = True

    @staticmethod
    def _closing_spare_connections(
        queue: AsyncQueue, wait: float, still_idle: bool = False
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """Closes the connections no call holds once a wait of ``wait`` seconds has lasted
        :data:`SPARE_CONNECTIONS_SECONDS` (at once when ``still_idle``: the wait before
        it brought nothing), if what is left of it makes up for making one again; the
        first call after the wait opens the connection its calls go on."""
        after = 0.0 if still_idle else SPARE_CONNECTIONS_SECONDS
        if wait < after + RECONNECT_SECONDS:
            return contextlib.nullcontext()
        return async_ended_after(after, queue.executor.close_idle_connections)

    def _serves_lane(self, message: Any) -> bool:
        """Whether a wake message names the lane of a task name this worker serves (a
        message names the lane where a tenant may now be served)."""
        if not message:
            return False
        lane = message["data"]
        return (lane.decode() if isinstance(lane, bytes) else str(lane)) in self.functions.functions
