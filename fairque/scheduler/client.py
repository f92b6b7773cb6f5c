"""``TaskScheduler`` and ``AsyncTaskScheduler``: manage schedules, and run instances.

Both are facades over :mod:`fairque.scheduler.ops` that send through an executor; the
execution cycle is written once, in :mod:`fairque.scheduler.runner`, and the sync
``run()`` runs it in asyncio (in any thread: ``stop()`` and ``shutdown()`` may be called
from another).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from fairque.config import QueueSettings
from fairque.engine import settings as settings_store
from fairque.engine.executor import AsyncClosing, AsyncExecutor, Closing, Executor
from fairque.engine.keys import Namespace
from fairque.engine.outage import OUTAGE
from fairque.engine.waiting import wait_event
from fairque.errors import ScheduleNotFound
from fairque.scheduler.config import SchedulerConfig
from fairque.scheduler.health import assess
from fairque.scheduler.metrics import SchedulerMetrics
from fairque.scheduler.models import Health, Schedule, ScheduleInfo, ScheduleState
from fairque.scheduler.ops import SchedulerOps, Snapshot, check_update
from fairque.scheduler.runner import SchedulerRunner, server_address


def _schedule(schedule: Schedule | None, fields: dict[str, Any]) -> Schedule:
    if schedule is not None and fields:
        raise TypeError("give a Schedule or its fields, not both")
    return schedule or Schedule.model_validate(fields)


def _current_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _one(snapshot: Snapshot, schedule_id: str) -> ScheduleInfo:
    if not snapshot.schedules:
        raise ScheduleNotFound(schedule_id)
    return snapshot.schedules[0]


class TaskScheduler(Closing):
    """Cron and interval schedules of one queue namespace (seed 002).

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
        self.url = url
        self.ops = SchedulerOps(Namespace(namespace))
        self.owns_executor = executor is None
        self.executor = executor or Executor.connect(url)
        settings_store.write_on_first_use(self.executor, self.ops.namespace, settings)
        self.config = config or SchedulerConfig()
        self.metrics = SchedulerMetrics()
        self._running: tuple[asyncio.AbstractEventLoop, SchedulerRunner] | None = None
        self._guard = threading.Lock()  # _running and _stop_asked, across threads
        self._stop_asked = False
        self._ended = threading.Event()  # set while no run() is in progress
        self._ended.set()

    def _now(self) -> int:
        """The clock of the namespace's server (on a cluster: of its slot's master)."""
        return self.executor.execute(self.ops.read([])).now

    def add_schedule(self, schedule: Schedule | None = None, **fields: Any) -> str:
        """Stores a new schedule (a :class:`Schedule`, or its fields); returns its id."""
        return self.executor.execute(self.ops.save(_schedule(schedule, fields), self._now(), "add"))

    def update_schedule(self, schedule_id: str, /, **changes: Any) -> ScheduleInfo:
        """Changes some fields of a schedule; every instance uses them from its next cycle.
        Raises :class:`ScheduleChanged` if it was changed by someone else meanwhile."""
        snapshot = self.executor.execute(self.ops.read([schedule_id]))
        info = _one(snapshot, schedule_id)
        schedule = check_update(info, changes)
        self.executor.execute(self.ops.save(schedule, snapshot.now, "update", info.version))
        return self.get_schedule(schedule_id)

    def remove_schedule(self, schedule_id: str) -> None:
        """Deletes a schedule; raises :class:`ScheduleNotFound` if there is none."""
        if not self.executor.execute(self.ops.remove(schedule_id)):
            raise ScheduleNotFound(schedule_id)

    def pause_schedule(self, schedule_id: str) -> ScheduleState:
        """Stops a schedule's runs until it is resumed."""
        return self.executor.execute(self.ops.pause(schedule_id))

    def resume_schedule(self, schedule_id: str) -> ScheduleState:
        """Runs a paused (or failed) schedule again, from its next run after now."""
        snapshot = self.executor.execute(self.ops.read([schedule_id]))
        return self.executor.execute(self.ops.resume(_one(snapshot, schedule_id), snapshot.now))

    def get_schedule(self, schedule_id: str) -> ScheduleInfo:
        """A schedule with its state, next run and history."""
        return _one(self.executor.execute(self.ops.read([schedule_id])), schedule_id)

    def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule of the namespace, by id."""
        snapshot = self.executor.execute(self.ops.read())
        return sorted(snapshot.schedules, key=lambda info: info.schedule_id)

    def instances(self) -> dict[str, dict[str, Any]]:
        """Every scheduler instance's record: state (``running``, ``stopped``, or ``stale``
        for a running one that stopped beating), ``live``, ``age`` (s since its last
        heartbeat), ``seen_at`` (us), host, pid and figures. Records expire
        ``instance_ttl`` after their last heartbeat."""
        return self.executor.execute(self.ops.read([])).instances

    def health_check(self) -> Health:
        """OK / WARNING / ERROR from the server's records (live instances for the active
        schedules, stale instances, failed schedules), and the cycle age and error rate
        of an instance running here (see :mod:`fairque.scheduler.health`)."""
        try:
            snapshot = self.executor.execute(self.ops.read())
        except OUTAGE:
            return assess(self.metrics, self.config, None, server_address(self.executor.client))
        return assess(self.metrics, self.config, snapshot)

    def run(self, handle_signals: bool = True) -> None:
        """Submits due runs until :meth:`stop` / :meth:`shutdown` (from any thread) or,
        in the main thread with ``handle_signals``, SIGTERM / SIGINT; then finishes the
        cycle, releases its locks and records the instance as stopped. Raises
        :class:`FairQueueError` naming the server if it does not answer at start."""
        # Signal handlers can only be installed in the main thread.
        signals = handle_signals and threading.current_thread() is threading.main_thread()

        async def main() -> None:
            executor = AsyncExecutor.connect(self.url)
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


class AsyncTaskScheduler(AsyncClosing):
    """:class:`TaskScheduler` for asyncio: the same methods, as coroutines.

    >>> scheduler = AsyncTaskScheduler()  # doctest: +SKIP
    >>> await scheduler.add_schedule(interval=30, task={"name": "ping", "user_id": "ops"})
    ... # doctest: +SKIP
    >>> await scheduler.run()  # until scheduler.stop()  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str | None = None,
        namespace: str = "default",
        *,
        config: SchedulerConfig | None = None,
        settings: QueueSettings | None = None,
        executor: AsyncExecutor | None = None,
    ) -> None:
        self.ops = SchedulerOps(Namespace(namespace))
        self.owns_executor = executor is None
        self.executor = executor or AsyncExecutor.connect(url)
        settings_store.write_on_first_use(self.executor, self.ops.namespace, settings)
        self.config = config or SchedulerConfig()
        self.metrics = SchedulerMetrics()
        self.runner = SchedulerRunner(self.executor, self.ops, self.config, self.metrics)
        self._ended = asyncio.Event()  # set while no run() is in progress
        self._ended.set()

    async def _now(self) -> int:
        """The clock of the namespace's server (on a cluster: of its slot's master)."""
        return (await self.executor.execute(self.ops.read([]))).now

    async def add_schedule(self, schedule: Schedule | None = None, **fields: Any) -> str:
        """Stores a new schedule (a :class:`Schedule`, or its fields); returns its id."""
        save = self.ops.save(_schedule(schedule, fields), await self._now(), "add")
        return await self.executor.execute(save)

    async def update_schedule(self, schedule_id: str, /, **changes: Any) -> ScheduleInfo:
        """Changes some fields of a schedule (see :meth:`TaskScheduler.update_schedule`)."""
        snapshot = await self.executor.execute(self.ops.read([schedule_id]))
        info = _one(snapshot, schedule_id)
        schedule = check_update(info, changes)
        await self.executor.execute(self.ops.save(schedule, snapshot.now, "update", info.version))
        return await self.get_schedule(schedule_id)

    async def remove_schedule(self, schedule_id: str) -> None:
        """Deletes a schedule; raises :class:`ScheduleNotFound` if there is none."""
        if not await self.executor.execute(self.ops.remove(schedule_id)):
            raise ScheduleNotFound(schedule_id)

    async def pause_schedule(self, schedule_id: str) -> ScheduleState:
        """Stops a schedule's runs until it is resumed."""
        return await self.executor.execute(self.ops.pause(schedule_id))

    async def resume_schedule(self, schedule_id: str) -> ScheduleState:
        """Runs a paused (or failed) schedule again, from its next run after now."""
        snapshot = await self.executor.execute(self.ops.read([schedule_id]))
        return await self.executor.execute(
            self.ops.resume(_one(snapshot, schedule_id), snapshot.now)
        )

    async def get_schedule(self, schedule_id: str) -> ScheduleInfo:
        """A schedule with its state, next run and history."""
        return _one(await self.executor.execute(self.ops.read([schedule_id])), schedule_id)

    async def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule of the namespace, by id."""
        snapshot = await self.executor.execute(self.ops.read())
        return sorted(snapshot.schedules, key=lambda info: info.schedule_id)

    async def instances(self) -> dict[str, dict[str, Any]]:
        """Every scheduler instance's record (see :meth:`TaskScheduler.instances`)."""
        return (await self.executor.execute(self.ops.read([]))).instances

    async def health_check(self) -> Health:
        """OK / WARNING / ERROR (see :meth:`TaskScheduler.health_check`)."""
        try:
            snapshot = await self.executor.execute(self.ops.read())
        except OUTAGE:
            return assess(self.metrics, self.config, None, server_address(self.executor.client))
        return assess(self.metrics, self.config, snapshot)

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
