"""``TaskScheduler`` and ``AsyncTaskScheduler``: manage schedules, and run instances.

Both are facades over :mod:`fairque.scheduler.ops` that send through an executor; the
execution cycle is written once, in :mod:`fairque.scheduler.runner`, and the sync
``run()`` runs it in asyncio.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fairque.config import QueueSettings
from fairque.engine import settings as settings_store
from fairque.engine.executor import AsyncExecutor, Executor
from fairque.engine.keys import Namespace
from fairque.engine.outage import OUTAGE
from fairque.errors import ScheduleNotFound
from fairque.scheduler.config import SchedulerConfig
from fairque.scheduler.health import assess
from fairque.scheduler.metrics import SchedulerMetrics
from fairque.scheduler.models import Health, Schedule, ScheduleInfo, ScheduleState
from fairque.scheduler.ops import SchedulerOps, Snapshot, check_update
from fairque.scheduler.runner import SchedulerRunner


def _schedule(schedule: Schedule | None, fields: dict[str, Any]) -> Schedule:
    if schedule is not None and fields:
        raise TypeError("give a Schedule or its fields, not both")
    return schedule or Schedule.model_validate(fields)


def _one(snapshot: Snapshot, schedule_id: str) -> ScheduleInfo:
    if not snapshot.schedules:
        raise ScheduleNotFound(schedule_id)
    return snapshot.schedules[0]


class TaskScheduler:
    """Cron and interval schedules of one queue namespace (seed 002).

    >>> scheduler = TaskScheduler()  # doctest: +SKIP
    >>> scheduler.add_schedule(cron="0 7 * * mon-fri", timezone="Asia/Tokyo",
    ...     task={"name": "daily_report", "user_id": "alice", "args": [3]})  # doctest: +SKIP
    >>> scheduler.run()  # submits due runs until SIGTERM  # doctest: +SKIP
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
        """Every scheduler instance's last record (state, seen_at in us, figures)."""
        return self.executor.execute(self.ops.read([])).instances

    def health_check(self) -> Health:
        """OK / WARNING / ERROR: server reachable, last cycle age, recent error rate."""
        try:
            schedules = self.list_schedules()
        except OUTAGE:
            return assess(self.metrics, self.config, False, [])
        return assess(self.metrics, self.config, True, schedules)

    def run(self, handle_signals: bool = True) -> None:
        """Submits due runs until SIGTERM / SIGINT (or :meth:`stop`), then finishes the
        cycle and stops. Without ``handle_signals`` only :meth:`stop` ends it."""

        async def main() -> None:
            executor = AsyncExecutor.connect(self.url)
            try:
                runner = SchedulerRunner(executor, self.ops, self.config, self.metrics)
                self._running = asyncio.get_running_loop(), runner
                await runner.run(handle_signals)
            finally:
                self._running = None
                await executor.close()

        asyncio.run(main())

    def stop(self) -> None:
        """Stops :meth:`run` (running in another thread) after its current cycle."""
        if self._running is not None:
            loop, runner = self._running
            loop.call_soon_threadsafe(runner.stop)

    def close(self) -> None:
        """Closes the connection pool, unless it was shared through ``executor``."""
        if self.owns_executor:
            self.executor.close()

    def __enter__(self) -> TaskScheduler:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncTaskScheduler:
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
        """Every scheduler instance's last record (state, seen_at in us, figures)."""
        return (await self.executor.execute(self.ops.read([]))).instances

    async def health_check(self) -> Health:
        """OK / WARNING / ERROR: server reachable, last cycle age, recent error rate."""
        try:
            schedules = await self.list_schedules()
        except OUTAGE:
            return assess(self.metrics, self.config, False, [])
        return assess(self.metrics, self.config, True, schedules)

    async def run(self, handle_signals: bool = False) -> None:
        """Submits due runs until :meth:`stop` (or a signal, with ``handle_signals``)."""
        await self.runner.run(handle_signals)

    def stop(self) -> None:
        """Stops :meth:`run` after its current cycle."""
        self.runner.stop()

    async def close(self) -> None:
        """Closes the connection pool, unless it was shared through ``executor``."""
        if self.owns_executor:
            await self.executor.close()

    async def __aenter__(self) -> AsyncTaskScheduler:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
