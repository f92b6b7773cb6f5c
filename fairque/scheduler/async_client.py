"""Managing schedules: :class:`AsyncSchedules`. The asyncio client is written by hand in
:mod:`fairque.scheduler.async_client`; the blocking one, in :mod:`fairque.scheduler.client`,
is generated from it (``tools/unasync.py``).

Facades over :mod:`fairque.scheduler.ops` that send through an executor. Running an
instance (submitting due runs) is the runners' (:mod:`fairque.runners.scheduler`), whose
:class:`~fairque.runners.scheduler.TaskScheduler` and
:class:`~fairque.runners.scheduler.AsyncTaskScheduler` add ``run()`` to these.
"""

from __future__ import annotations

from typing import Any

from fairque.config import QueueSettings
from fairque.engine import settings as settings_store
from fairque.engine.async_executor import AsyncClosing, AsyncExecutor
from fairque.engine.keys import Namespace
from fairque.engine.outage import OUTAGE
from fairque.engine.routes import describe
from fairque.errors import ScheduleNotFound
from fairque.scheduler.config import SchedulerConfig
from fairque.scheduler.health import assess
from fairque.scheduler.metrics import SchedulerMetrics
from fairque.scheduler.models import Health, Schedule, ScheduleInfo, ScheduleState
from fairque.scheduler.ops import SchedulerOps, Snapshot, check_update


def _schedule(schedule: Schedule | None, fields: dict[str, Any]) -> Schedule:
    if schedule is not None and fields:
        raise TypeError("give a Schedule or its fields, not both")
    return schedule or Schedule.model_validate(fields)


def _one(snapshot: Snapshot, schedule_id: str) -> ScheduleInfo:
    if not snapshot.schedules:
        raise ScheduleNotFound(schedule_id)
    return snapshot.schedules[0]


class AsyncSchedules(AsyncClosing):
    """Cron and interval schedules of one queue namespace: add, change, pause,
    list, and the health of the instances that run them."""

    def __init__(
        self,
        url: str | None = None,
        namespace: str = "default",
        *,
        config: SchedulerConfig | None = None,
        settings: QueueSettings | None = None,
        executor: AsyncExecutor | None = None,
    ) -> None:
        self.url = url
        self.settings = settings  # written before the first call, here and by run()
        self.ops = SchedulerOps(Namespace(namespace))
        self.owns_executor = executor is None
        self.executor = executor or AsyncExecutor.connect(url)
        settings_store.write_on_first_use(self.executor, self.ops.namespace, settings)
        self.config = config or SchedulerConfig()
        self.metrics = SchedulerMetrics()  # of an instance run here, if any

    async def _now(self) -> int:
        """The clock of the namespace's server (on a cluster: of its slot's master)."""
        return (await self.executor.execute(self.ops.read([]))).now

    async def add_schedule(self, schedule: Schedule | None = None, **fields: Any) -> str:
        """Stores a new schedule (a :class:`Schedule`, or its fields); returns its id."""
        save = self.ops.save(_schedule(schedule, fields), await self._now(), "add")
        return await self.executor.execute(save)

    async def update_schedule(self, schedule_id: str, /, **changes: Any) -> ScheduleInfo:
        """Changes some fields of a schedule; every instance uses them from its next cycle.
        Raises :class:`ScheduleChanged` if it was changed by someone else meanwhile."""
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
        resume = self.ops.resume(_one(snapshot, schedule_id), snapshot.now)
        return await self.executor.execute(resume)

    async def get_schedule(self, schedule_id: str) -> ScheduleInfo:
        """A schedule with its state, next run and history."""
        return _one(await self.executor.execute(self.ops.read([schedule_id])), schedule_id)

    async def list_schedules(self) -> list[ScheduleInfo]:
        """Every schedule of the namespace, by id."""
        snapshot = await self.executor.execute(self.ops.read())
        return sorted(snapshot.schedules, key=lambda info: info.schedule_id)

    async def instances(self) -> dict[str, dict[str, Any]]:
        """Every scheduler instance's record: state (``running``, ``stopped``, or ``stale``
        for a running one that stopped beating), ``live``, ``age`` (s since its last
        heartbeat), ``seen_at`` (us), host, pid and figures. Records expire
        ``instance_ttl`` after their last heartbeat."""
        return (await self.executor.execute(self.ops.read([]))).instances

    async def health_check(self) -> Health:
        """OK / WARNING / ERROR from the server's records (live instances for the active
        schedules, stale instances, failed schedules), and the cycle age and error rate
        of an instance running here (see :mod:`fairque.scheduler.health`)."""
        try:
            snapshot = await self.executor.execute(self.ops.read())
        except OUTAGE:
            return assess(self.metrics, self.config, None, describe(self.executor.route))
        return assess(self.metrics, self.config, snapshot)
