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
import signal

from fairque.engine.eviction import async_eviction_warning
from fairque.engine.notify import AsyncListener
from fairque.engine.observer import Observer
from fairque.engine.outage import OUTAGE, OutageLog
from fairque.engine.routes import describe
from fairque.errors import InvalidInput
from fairque.queue.async_client import AsyncQueue, open_async_queue
from fairque.runners.fair_worker.acks import Acknowledgements
from fairque.runners.fair_worker.config import WorkerConfig
from fairque.runners.fair_worker.counts import Counts
from fairque.runners.fair_worker.fetch import Fetcher
from fairque.runners.fair_worker.functions import Registry, registry
from fairque.runners.fair_worker.hooks import WorkerHooks
from fairque.runners.fair_worker.runs import Runs
from fairque.runners.fair_worker.upkeep import Upkeep

try:
    from uvloop import run as run_loop
except ImportError:  # pragma: no cover - PyPy and Windows, where uvloop is not installed
    from asyncio import run as run_loop  # type: ignore[assignment]

log = logging.getLogger("fairque.worker")

LAST_ACKS_SECONDS = 1.0  # after a stop without grace, pending acknowledgements get this long


class Worker:
    """Runs registered task functions from one namespace.

    Its parts: the fetch loop (:class:`~fairque.runners.fair_worker.fetch.Fetcher`),
    the runs (:class:`~fairque.runners.fair_worker.runs.Runs`), the acknowledgements
    (:class:`~fairque.runners.fair_worker.acks.Acknowledgements`) and the leases,
    registry entry and abort listener (:class:`~fairque.runners.fair_worker.upkeep.Upkeep`).

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
        self._stopping = asyncio.Event()
        self._now = asyncio.Event()  # stop without the grace period (a second signal)
        look_again = asyncio.Event()  # the fetch loop looks again: a slot freed, a stop
        self.counts = Counts()
        # Says when the server is lost and back (its name once the queue is known).
        self._outage = OutageLog(log, "", "the worker waits for it; tasks running now go on")
        self._acks = Acknowledgements(self.counts, self._outage)
        self._runs = Runs(
            config,
            self.functions,
            self.hooks,
            metrics,
            self._acks,
            self.counts,
            self._outage,
            self._stopping,
            self._now,
            look_again,
        )
        self._upkeep = Upkeep(config, self.functions, self._runs, self._outage, self._stopping)
        self._fetcher = Fetcher(
            config,
            self.functions,
            self._runs,
            self._acks,
            self._upkeep,
            self.counts,
            self._outage,
            self._stopping,
            look_again,
        )

    @property
    def finished(self) -> int:
        """Tasks whose success was acknowledged."""
        return self.counts.finished

    @property
    def failed(self) -> int:
        """Tasks whose failure was recorded."""
        return self.counts.failed

    @property
    def outages(self) -> int:
        """Times the server was found unreachable."""
        return self.counts.outages

    @property
    def handed_back(self) -> int:
        """Unfinished tasks released at the stop."""
        return self.counts.handed_back

    def stop(self, now: bool = False) -> None:
        """Asks the worker to stop (from the worker's event loop): it fetches no more and
        gives running tasks ``grace_seconds`` to finish, or none with ``now``."""
        self._stopping.set()
        self._fetcher.look_again.set()  # a fetch loop waiting for a free slot must notice
        self._fetcher.stop_waiting()  # an idle pop: it pops now, then the loop sees the stop
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
        # The lanes its pops reach, and whose wake-up tokens its upkeep reads.
        self._fetcher.names = self._upkeep.names = tuple(sorted(self.functions.functions))
        signals = (signal.SIGTERM, signal.SIGINT) if handle_signals else ()
        loop = asyncio.get_running_loop()
        try:
            await self._runs.sync.start()
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
            await self._runs.sync.close()

    async def _serve(self, queue: AsyncQueue) -> None:
        config = self.config
        self._outage.server = describe(queue.executor.route)
        wake: AsyncListener | None = None
        if not self._fetcher.waits_in_pop(queue):
            wake = await self._fetcher.subscribe_when_reachable(queue)
            if wake is None:  # stopped before the server could be reached
                if self._queue is None:
                    await queue.close()
                return
        heartbeat = asyncio.create_task(self._upkeep.heartbeat(queue))
        tried = asyncio.Event()
        aborts = asyncio.create_task(self._upkeep.listen_for_aborts(queue, tried))
        maintenance = asyncio.create_task(self._upkeep.maintain(queue))
        acknowledger = asyncio.create_task(self._acks.run(queue))
        if self.check_eviction:
            await self._warn_of_eviction(queue)
        # No run is leased before it can be aborted, unless the server is away (then the
        # fetch loop says so, and waits for it).
        await self._first_of(tried, self._stopping)
        log.info("worker %s started (concurrency %d)", self.config.id, self.config.concurrency)
        try:
            await self._fetcher.fetch(queue, wake)
            await self._runs.hand_back(queue)
        finally:
            heartbeat.cancel()
            self._stopping.set()  # also when the fetch loop ended by an error
            await aborts  # it ends by itself once stopping is set
            await maintenance  # it ends by itself once stopping is set, never mid-call
            # The acknowledger sends what is pending, then ends (never cut off mid-call).
            self._acks.close()
            now = asyncio.ensure_future(self._now.wait())
            await asyncio.wait([acknowledger, now], return_when=asyncio.FIRST_COMPLETED)
            if not acknowledger.done():  # a stop without grace: a moment for the last ones
                await asyncio.wait([acknowledger], timeout=LAST_ACKS_SECONDS)
            for waiter in (acknowledger, now):
                waiter.cancel()
            await asyncio.gather(acknowledger, now, return_exceptions=True)
            if self._acks.pending:
                log.warning("%d result(s) not acknowledged; those tasks will run again after "
                            "their lease", len(self._acks.pending))  # fmt: skip
            if wake is not None:
                await wake.close()
            await self._fetcher.close()
            if self._queue is None:
                await queue.close()
            self._runs.close()
            log.info("worker %s stopped", config.id)

    async def _warn_of_eviction(self, queue: AsyncQueue) -> None:
        """Says once, at the start, if the server may evict task keys (eviction.py)."""
        try:
            # Asked of a node the calls use: a cluster client's own connections, made
            # for this question only, would stay open (the server pays for each).
            node = await queue.executor.client_for(queue.abort_channels[0])
            warning = await async_eviction_warning(node)
        except OUTAGE:
            return  # the fetch loop says the server is away, and waits for it
        if warning:
            log.warning("%s", warning)

    @staticmethod
    async def _first_of(*events: asyncio.Event) -> None:
        """Waits until one of ``events`` is set."""
        waits = [asyncio.ensure_future(event.wait()) for event in events]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
