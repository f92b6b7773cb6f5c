"""The Manager: moves storage workers' processors toward queues with backlog.

It talks to workers only through the storage's server (the board of
:mod:`fairque.storage.plan`): each round it reads the live workers' reports and the
queues' figures, and publishes the plan that workers take their part of at their next
beat. So a Manager steers workers in any process on any host.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from fairque.engine.outage import OUTAGE, Backoff, OutageLog
from fairque.engine.waiting import wait_event
from fairque.storage.async_protocol import AsyncStorage
from fairque.storage.models import Stats
from fairque.storage.plan import WorkerReport

log = logging.getLogger("fairque.storage")


# A processor stays on the queue it serves unless another queue needs it this many times
# more: backlogs that change a little from round to round do not move workers about.
STICKINESS = 1.5


@dataclass
class PlanHistory:
    """What the Manager remembers from one round to the next."""

    plans: dict[str, list[int]] = field(default_factory=dict)  # the last plan published
    waited: dict[int, int] = field(default_factory=dict)  # rounds with ready work, no processor


def plan_workers(
    reports: Sequence[WorkerReport], stats: Stats, history: PlanHistory | None = None
) -> dict[str, list[int]]:
    """The plan for every live worker with ready work in a queue it serves (worker id: the
    queue of each processor), made over all the workers' processors at once:

    1. A processor for every queue with ready work, the queues that waited the most rounds
       without one first, then the most work (ready tasks times their measured cost):
       with more such queues than processors, those left out this round come first in
       the next, so each waits at most ``ceil(queues / processors) - 1`` rounds.
    2. The rest where work per processor is highest, never more processors on a queue than
       it has ready batches.

    A processor stays where the last plan (``history``) put it unless another queue needs
    it :data:`STICKINESS` times more, so plans hold while backlogs do. ``history`` is
    updated for the next round. A worker none of whose queues has ready work gets no
    entry (it goes on as it was); one left with nothing to pin gets ``[]``, round robin."""
    history = history if history is not None else PlanHistory()
    handled: dict[int, int] = {}
    seconds: dict[int, float] = {}
    for report in reports:
        for queue, figures in report.queues.items():
            handled[queue] = handled.get(queue, 0) + figures.handled
            seconds[queue] = seconds.get(queue, 0.0) + figures.seconds
    costs = {queue: seconds[queue] / count for queue, count in handled.items() if count}
    default_cost = sum(costs.values()) / len(costs) if costs else 1.0
    ready = {queue: stats.of(queue).ready for queue in handled}
    work = {q: n * (costs.get(q) or default_cost) for q, n in ready.items() if n > 0}
    planned = sorted(
        (report for report in reports if any(queue in work for queue in report.queues)),
        key=lambda report: report.worker_id,
    )
    free = {report.worker_id: report.processors for report in planned}
    given: dict[str, list[int]] = {report.worker_id: [] for report in planned}
    kept = {report.worker_id: list(history.plans.get(report.worker_id, [])) for report in planned}
    unclaimed = {queue: ready[queue] for queue in work}  # ready tasks no processor claims yet
    processors_on = dict.fromkeys(work, 0)

    def assign(report: WorkerReport, queue: int) -> None:
        worker = report.worker_id
        given[worker].append(queue)
        free[worker] -= 1
        unclaimed[queue] = max(0, unclaimed[queue] - report.queues[queue].batch_size)
        processors_on[queue] += 1
        if queue in kept[worker]:
            kept[worker].remove(queue)

    for queue in sorted(work, key=lambda q: (-history.waited.get(q, 0), -work[q], q)):
        serving = [r for r in planned if queue in r.queues and free[r.worker_id]]
        if serving:
            assign(min(serving, key=lambda r: (
                queue not in kept[r.worker_id], -free[r.worker_id], r.worker_id,
            )), queue)  # fmt: skip
    while True:
        options = [
            (-work[queue] / (processors_on[queue] + 1)
             * (STICKINESS if queue in kept[report.worker_id] else 1.0),
             queue, -free[report.worker_id], report.worker_id, report)
            for report in planned if free[report.worker_id]
            for queue in report.queues if unclaimed.get(queue)
        ]  # fmt: skip
        if not options:
            break
        *_, queue, _, _, report = min(options, key=lambda option: option[:4])
        assign(report, queue)
    history.waited = {q: 0 if processors_on[q] else history.waited.get(q, 0) + 1 for q in work}
    plans = {worker: sorted(queues) for worker, queues in given.items()}
    live = {report.worker_id for report in reports}
    history.plans = {w: plan for w, plan in {**history.plans, **plans}.items() if w in live}
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
        self._outage = OutageLog(log, "of the storage", "the manager waits for it")
        self.history = PlanHistory()
        self._stopping = asyncio.Event()

    async def rebalance(self) -> dict[str, list[int]]:
        """One round: the plan published (worker id: the queue of each processor)."""
        reports = await self.storage.workers()
        stats: Stats = await self.storage.get_stat()
        plan = plan_workers(reports, stats, self.history)
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
                    self._outage.failed(exc)
                    await wait_event(self._stopping, backoff.next())
                    continue
                backoff.reset()
                self._outage.answered()
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
