"""The Manager: moves storage workers' processors toward queues with backlog.

It talks to workers only through the storage's server (the board of
:mod:`fairque.storage.plan`): each round it reads the live workers' reports and the
queues' figures, and publishes the plan that workers take their part of at their next
beat. So a Manager steers workers in any process on any host.
"""

from __future__ import annotations

import asyncio
import logging
import math
import signal
from collections.abc import Callable, Mapping, Sequence

from fairque.engine.outage import OUTAGE, Backoff
from fairque.engine.waiting import wait_event
from fairque.storage.models import Stats
from fairque.storage.plan import WorkerReport
from fairque.storage.protocol import AsyncStorage

log = logging.getLogger("fairque.storage")


def plan_processors(
    processors: int,
    ready: Mapping[int, int],
    batch_sizes: Mapping[int, int],
    seconds_per_task: Mapping[int, float],
) -> list[int] | None:
    """Which queue each processor should serve: one for each queue with ready work (the
    most work first, while processors last), the rest where there is more work (ready
    tasks times their measured cost) by highest averages; never more processors on a
    queue than it has batches ready. None when no queue has ready work."""
    known = [cost for cost in seconds_per_task.values() if cost > 0]
    default_cost = sum(known) / len(known) if known else 1.0
    work = {
        queue: count * (seconds_per_task.get(queue) or default_cost)
        for queue, count in ready.items()
        if count > 0
    }
    if not work:
        return None
    given = dict.fromkeys(work, 0)
    for queue in sorted(work, key=lambda q: -work[q])[:processors]:
        given[queue] = 1  # no queue with backlog waits for another to drain
    for _ in range(processors - sum(given.values())):
        open_queues = [q for q in work if given[q] < math.ceil(ready[q] / batch_sizes[q])]
        if not open_queues:
            break
        best = max(open_queues, key=lambda q: (work[q] / (given[q] + 1), -q))
        given[best] += 1
    return [queue for queue in sorted(given) for _ in range(given[queue])]


def plan_workers(reports: Sequence[WorkerReport], stats: Stats) -> dict[str, list[int]]:
    """The plan for every live worker: worker by worker (by id), :func:`plan_processors`
    over the ready tasks the workers before it have not claimed yet (a batch per pinned
    processor), with per-queue costs measured by all of them. A worker none of whose
    queues has ready work gets no instruction (it goes on as it was); one whose ready
    work the others already claimed gets ``[]``, round robin."""
    handled: dict[int, int] = {}
    seconds: dict[int, float] = {}
    for report in reports:
        for queue, figures in report.queues.items():
            handled[queue] = handled.get(queue, 0) + figures.handled
            seconds[queue] = seconds.get(queue, 0.0) + figures.seconds
    costs = {queue: seconds[queue] / count for queue, count in handled.items() if count}
    unclaimed = {queue: stats.of(queue).ready for queue in handled}
    plans: dict[str, list[int]] = {}
    for report in sorted(reports, key=lambda r: r.worker_id):
        if not any(stats.of(queue).ready for queue in report.queues):
            continue
        batches = {queue: figures.batch_size for queue, figures in report.queues.items()}
        ready = {queue: unclaimed[queue] for queue in report.queues}
        plan = plan_processors(report.processors, ready, batches, costs) or []
        for queue in plan:
            unclaimed[queue] = max(0, unclaimed[queue] - batches[queue])
        plans[report.worker_id] = plan
    return plans


class Manager:
    """Moves processors toward queues with backlog (the storage's Manager), in whichever
    process it runs: each round reads the live workers' reports and ``get_stat()`` from
    the storage, and publishes the plan there (:func:`plan_workers`); workers take their
    part at their next beat. With no backlog it tells nobody anything, and workers keep
    doing what they did."""

    def __init__(self, storage: AsyncStorage, interval: float = 5.0) -> None:
        self.storage = storage
        self.interval = interval
        self.outages = 0  # rounds the storage was unreachable
        self._stopping = asyncio.Event()

    async def rebalance(self) -> dict[str, list[int]]:
        """One round: the plan published (worker id: the queue of each processor)."""
        reports = await self.storage.workers()
        stats: Stats = await self.storage.get_stat()
        plan = plan_workers(reports, stats)
        await self.storage.publish_plan(plan)
        return plan

    def stop(self) -> None:
        self._stopping.set()

    async def run(self, on_plan: Callable[[dict[str, list[int]]], None] | None = None) -> None:
        """Rebalances every ``interval`` seconds until :meth:`stop`; logs each new plan
        (and hands it to ``on_plan``)."""
        backoff = Backoff()
        last: dict[str, list[int]] | None = None
        try:
            while not self._stopping.is_set():
                try:
                    plan = await self.rebalance()
                except OUTAGE as exc:
                    self.outages += 1
                    log.warning("manager: storage unreachable (%s); trying again", exc)
                    await wait_event(self._stopping, backoff.next())
                    continue
                backoff.reset()
                if plan != last:
                    log.info("manager: plan %s", plan)
                    if on_plan:
                        on_plan(plan)
                    last = plan
                await wait_event(self._stopping, self.interval)
        finally:
            self._stopping.clear()


async def serve_manager(
    storage: AsyncStorage,
    interval: float,
    on_plan: Callable[[dict[str, list[int]]], None] | None = None,
) -> Manager:
    """Runs a :class:`Manager` alone (workers run elsewhere) until SIGTERM / SIGINT."""
    manager = Manager(storage, interval)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, manager.stop)
    await manager.run(on_plan)
    return manager
