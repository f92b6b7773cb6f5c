"""Each fair-queue operation as a plan (:mod:`fairque.engine.shards`), over one namespace
or the shards of one queue. The clients (:mod:`fairque.queue.async_client`, and
:mod:`fairque.queue.client` generated from it) only run plans, so which shards a call
goes to and how their replies merge are written once, here, for the blocking and asyncio
clients alike.

A sharded queue is one logical fair queue over N namespaces ``<ns>:0`` .. ``<ns>:N-1``. A
tenant lives on one shard, chosen by a stable hash of its name (CRC-32, the same in every
process and language), so its order and its dependencies stay within one namespace:
tasks go to their tenant's shard, pops ask every shard in a rotating order, lists page
through the shards in turn, stats and maintenance add the shards up. Calls that name
only a task id (``get``, ``cancel``, ``retry``, XCom) look for the shard that holds it;
calls that carry a task (``finish``, ``fail``...) go straight to its tenant's shard.
With one namespace every plan is the namespace's own call.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from fairque.config import QueueSettings
from fairque.engine import settings as settings_store
from fairque.engine.calls import Call
from fairque.engine.keys import Namespace
from fairque.engine.records import Record, TaskState, check_identifier
from fairque.engine.shards import Plan, ShardPlans, Steps, shard_index
from fairque.errors import InvalidInput, ServerUnavailable
from fairque.queue.models import (
    STATS_TENANTS,
    Backlog,
    FairnessView,
    LeasedTask,
    LimitsPage,
    Maintenance,
    MaintenanceStatus,
    MinuteFigures,
    QueueStats,
    SharesPage,
    Task,
    TaskInfo,
    TaskLimits,
    TaskPage,
    TenantStats,
    TenantStatsPage,
    WorkerInfo,
)
from fairque.queue.ops import MIN_POP_WAIT, Leased, QueueOps
from fairque.queue.shares import SharesChangeModel

T = TypeVar("T")
P = TypeVar("P", TaskPage, TenantStatsPage, SharesPage)


def merge_limits(parts: Sequence[TaskLimits]) -> TaskLimits:
    """The shards' rows of one task name as one: its running tasks summed."""
    return dataclasses.replace(parts[0], running=sum(part.running for part in parts))


def merge_fairness(parts: Sequence[FairnessView], top: int) -> FairnessView:
    """The shards' fairness views as one: each tenant lives on one shard, so the busiest
    of all are among the shards' busiest."""
    starts = sum(part.starts for part in parts)
    waits = tuple(map(sum, zip(*(part.waits for part in parts), strict=True)))
    busiest = sorted((one for part in parts for one in part.tenants), key=lambda one: -one.starts)
    tenants = [
        dataclasses.replace(one, share=one.starts / starts if starts else 0.0)
        for one in busiest[:top]
    ]
    history = [
        MinuteFigures(
            at=minutes[0].at,
            starts=sum(m.starts for m in minutes),
            pushed=sum(m.pushed for m in minutes),
            finished=sum(m.finished for m in minutes),
            failed=sum(m.failed for m in minutes),
        )
        for minutes in zip(*(part.history for part in parts), strict=True)
    ]
    return FairnessView(
        at=max(part.at for part in parts), minutes=parts[0].minutes, starts=starts,
        waits=waits, tenants=tenants, other_starts=starts - sum(one.starts for one in tenants),
        history=history,
    )  # fmt: skip


def merge_stats(parts: Sequence[QueueStats], fairness_top: int) -> QueueStats:
    """The stats of all shards summed (a tenant's figures add up if it moved shards)."""
    states: dict[TaskState, int] = {}
    counters: dict[str, int] = {}
    tenants: dict[str, TenantStats] = {}
    all_tenants = TenantStats()
    for part in parts:
        all_tenants = _add(all_tenants, part.all_tenants)
        for state, count in part.states.items():
            states[state] = states.get(state, 0) + count
        for name, value in part.counters.items():
            counters[name] = counters.get(name, 0) + value
        for tenant, figures in part.tenants.items():
            tenants[tenant] = _add(tenants[tenant], figures) if tenant in tenants else figures
    rounds = [part.maintenance for part in parts]
    ran = [status.last_run_at for status in rounds if status.last_run_at is not None]
    maintenance = MaintenanceStatus(
        last_run_at=min(ran) if len(ran) == len(rounds) else None,  # the shard longest idle
        rounds=sum(status.rounds for status in rounds),
        dropped=sum(status.dropped for status in rounds),
    )
    views = [part.fairness for part in parts if part.fairness is not None]
    # Each tenant lives on one shard: the busiest of all are among the shards' busiest.
    busiest = sorted(tenants.items(), key=lambda item: (-item[1].queued, item[0]))
    return QueueStats(
        states=states,
        counters=counters,
        tenants=dict(busiest[:STATS_TENANTS]),
        maintenance=maintenance,
        fairness=merge_fairness(views, fairness_top) if views else None,
        all_tenants=all_tenants,
        tenants_with_ready=sum(part.tenants_with_ready for part in parts),
    )


def _add(left: TenantStats, right: TenantStats) -> TenantStats:
    return TenantStats(**{
        field.name: getattr(left, field.name) + getattr(right, field.name)
        for field in dataclasses.fields(TenantStats)
    })  # fmt: skip


def merge_maintenance(parts: Sequence[Maintenance]) -> Maintenance:
    """What maintenance did on all shards."""
    return Maintenance(
        expired=sum(part.expired for part in parts),
        promoted=sum(part.promoted for part in parts),
        dropped=sum(part.dropped for part in parts),
        orphaned=sum(part.orphaned for part in parts),
        ran=any(part.ran for part in parts),
        more=any(part.more for part in parts),
    )


def soonest(dues: Iterable[float | None]) -> float | None:
    """The earliest of the shards' next-due delays; None if no shard has anything due."""
    return min((due for due in dues if due is not None), default=None)


def merge_workers(parts: Sequence[Sequence[WorkerInfo]]) -> list[WorkerInfo]:
    """The workers registered on the shards (each registers on all), each once."""
    latest: dict[str, WorkerInfo] = {}
    for part in parts:
        for worker in part:
            known = latest.get(worker.worker_id)
            if known is None or worker.seen_at > known.seen_at:
                latest[worker.worker_id] = worker
    return [latest[worker_id] for worker_id in sorted(latest)]


class QueuePlans(ShardPlans[QueueOps]):
    """The plans of every fair-queue operation over ``namespaces``: one (a
    :class:`~fairque.FairQueue`) or the shards of one queue (a
    :class:`~fairque.ShardedQueue`). The arguments are checked where each call is built
    (:class:`~fairque.queue.ops.QueueOps`)."""

    def __init__(self, namespaces: Sequence[str]) -> None:
        super().__init__([QueueOps(Namespace(name)) for name in namespaces])

    def shard_of(self, tenant: str) -> int:
        """The index of the shard that holds ``tenant``'s tasks."""
        if self.single is not None:
            return 0
        try:
            return shard_index(check_identifier(tenant), len(self.shards))
        except ValueError as exc:
            raise InvalidInput("user_id", str(exc)) from None

    def for_tenant(self, tenant: str) -> QueueOps:
        """The calls of the shard that holds ``tenant``'s tasks."""
        return self.single or self.shards[self.shard_of(tenant)]

    def push(self, tasks: Sequence[Task], replicas: int, timeout: float) -> Plan[list[str]]:
        """Pushes, atomically per shard (all or none of each shard's tasks); the ids in
        the order of ``tasks``."""
        if self.single is not None:
            return self.single.push(tasks).replicated(replicas, timeout)
        return self._push_split(tasks, replicas, timeout)

    def _push_split(self, tasks: Sequence[Task], replicas: int, timeout: float) -> Steps[list[str]]:
        groups = self.split([task.user_id for task in tasks])
        parts = yield [
            ops.push([tasks[i] for i in positions]).replicated(replicas, timeout)
            for ops, positions in groups
        ]
        ids = [""] * len(tasks)
        for (_, positions), part in zip(groups, parts, strict=True):
            for position, task_id in zip(positions, part, strict=True):
                ids[position] = task_id
        return ids

    def pop(
        self,
        count: int,
        assigned_users: Sequence[str] | None,
        steal_targets: Sequence[str] | None,
        worker_id: str | None,
        lease_seconds: float | None,
        *,
        wait: float | None,
        names: Sequence[str] | None = None,
    ) -> Steps[list[LeasedTask]]:
        """Leases up to ``count`` tasks, asking the shards in a rotating order, each only
        for what the ones before it did not give. A task whose record cannot be read is
        failed (its error names the field) instead of being returned."""
        if wait is not None:
            if self.single is None:
                raise InvalidInput(
                    "wait", "a sharded queue's pop cannot wait: use its wake_channels"
                )
            pop = functools.partial(
                self.single.pop,
                count,
                assigned_users,
                steal_targets,
                worker_id,
                lease_seconds,
                names=names,
            )
            return (yield from self._pop_waiting(self.single, pop, wait))
        got: list[LeasedTask] = []
        away: ServerUnavailable | None = None  # a shard's server, failing over perhaps
        for index in [0] if self.single is not None else self.rotation.next_order():
            ops = self.shards[index]
            wanted = count - len(got) if got else count  # as given: the call checks it
            call = ops.pop(
                wanted, assigned_users, steal_targets, worker_id, lease_seconds, names=names
            )
            if self.single is not None:
                return (yield from self._leased(ops, call))  # as the script returned it
            try:
                leased: Leased = yield from self._leased(ops, call)
            except ServerUnavailable as exc:  # the other shards still serve (and what
                away = away or exc  # was leased from them must reach the worker)
                continue
            got += leased
            if len(got) >= count:
                break
        if away is not None and not got:
            raise away
        return got

    @staticmethod
    def _leased(ops: QueueOps, call: Call[Leased]) -> Steps[Leased]:
        """Sends a pop; fails the tasks whose record it could not read."""
        leased: Leased = (yield [call])[0]
        yield from QueuePlans._fail_unreadable(ops, leased)
        return leased

    @staticmethod
    def _fail_unreadable(ops: QueueOps, leased: Leased) -> Steps[None]:
        """Fails the tasks a pop leased but could not read (their errors name the field)."""
        if leased.unreadable:
            yield [ops.fail_unreadable(unreadable) for unreadable in leased.unreadable]

    def _pop_waiting(
        self, ops: QueueOps, pop: Callable[..., Call[Leased]], wait: float
    ) -> Steps[Leased]:
        """A pop that waits up to ``wait`` s for a tenant to become servable: for a push
        (the wake-up token), and no longer than until work comes due without one (a
        delayed task, a retry backoff, a rate window opening), which the pop itself
        makes ready. A wait that ends early (a push another worker took first, or
        ``stop_waiting``) ends the pop; one that ran to a due time goes on waiting."""
        pop(wait=wait)  # checks every argument before anything is sent
        deadline = time.monotonic() + wait
        while True:
            due = (yield [ops.next_due(leases=False)])[0]
            left = deadline - time.monotonic()
            seconds = max(MIN_POP_WAIT, left if due is None else min(left, due))
            started = time.monotonic()
            leased = yield from self._leased(ops, pop(wait=seconds))
            waited = time.monotonic() - started
            if leased or seconds >= left or waited < seconds:
                return leased

    def finish(self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None) -> Plan[list[str]]:
        """Finishes tasks, one call per shard; the ids whose lease was lost."""
        if self.single is not None:
            return self.single.finish(tasks, results)
        values = list(results) if results is not None else [None] * len(tasks)
        return self._lost_on_each(
            tasks, lambda ops, ids: ops.finish([tasks[i] for i in ids], [values[i] for i in ids])
        )

    def finish_and_pop(
        self,
        tasks: Sequence[LeasedTask],
        results: Sequence[Any] | None,
        *,
        count: int,
        assigned_users: Sequence[str] | None,
        steal_targets: Sequence[str] | None,
        worker_id: str | None,
        lease_seconds: float | None,
        names: Sequence[str] | None,
    ) -> Steps[tuple[list[str], list[LeasedTask]]]:
        """Finishes tasks, then pops, in one call of one namespace: the ids whose lease was
        lost, and the tasks leased (those whose record could not be read are failed)."""
        ops = self.single
        if ops is None:  # the tasks' shards and the pop's are not one slot
            raise InvalidInput("tasks", "a sharded queue finishes and pops in separate calls")
        call = ops.finish_and_pop(
            tasks, results, count=count, assigned_users=assigned_users,
            steal_targets=steal_targets, worker_id=worker_id, lease_seconds=lease_seconds,
            names=names,
        )  # fmt: skip
        lost, leased = (yield [call])[0]
        yield from self._fail_unreadable(ops, leased)
        return lost, leased

    def release(self, tasks: Sequence[LeasedTask]) -> Plan[list[str]]:
        """Hands tasks back, one call per shard; the ids whose lease was lost."""
        if self.single is not None:
            return self.single.release(tasks)
        return self._lost_on_each(tasks, lambda ops, ids: ops.release([tasks[i] for i in ids]))

    def hand_over(self, tasks: Sequence[LeasedTask], delay: float, grace: float) -> Plan[list[str]]:
        """Gives back tasks a worker cannot run, one call per shard; the ids whose lease
        was lost."""
        if self.single is not None:
            return self.single.hand_over(tasks, delay, grace)
        return self._lost_on_each(
            tasks, lambda ops, ids: ops.hand_over([tasks[i] for i in ids], delay, grace)
        )

    def cancel(self, task_id: str) -> Plan[bool]:
        """Cancels a task on the shard that holds it."""
        return self.on_holder(task_id, lambda ops: ops.cancel(task_id))

    def retry(self, task_id: str) -> Plan[bool]:
        """Queues a failed task again on the shard that holds it."""
        return self.on_holder(task_id, lambda ops: ops.retry(task_id))

    def xcom_push(self, task_id: str, key: str, value: Any, ttl: float | None) -> Plan[None]:
        """Stores an XCom value on the shard that holds ``task_id``."""
        return self.on_holder(task_id, lambda ops: ops.xcom_push(task_id, key, value, ttl))

    def xcom_pull(self, task_id: str, key: str, default: Any) -> Plan[Any]:
        """Reads an XCom value from the shard that holds ``task_id``."""
        return self.on_holder(task_id, lambda ops: ops.xcom_pull(task_id, key, default))

    def tasks(
        self,
        state: TaskState | str,
        user_id: str | None,
        name: str | None,
        cursor: int,
        limit: int,
    ) -> Plan[TaskPage]:
        """A page of the tasks in ``state``, shard after shard (a tenant's: its shard's)."""
        if user_id is not None or self.single is not None:
            ops = self.single or self.for_tenant(str(user_id))
            return ops.tasks(state, user_id, name, cursor, limit)
        return self.paged(
            cursor, limit, lambda ops, inner, wanted: ops.tasks(state, None, name, inner, wanted),
            lambda pages, cursor: TaskPage([one for page in pages for one in page.tasks], cursor),
            lambda page: len(page.tasks),
        )  # fmt: skip

    def retry_failed(self, user_id: str) -> Steps[int]:
        """Queues every FAILED task of ``user_id`` again, a slice per call, on its shard;
        how many."""
        ops = self.for_tenant(user_id)
        retried, cursor = 0, 0
        while True:
            reply: tuple[int, int] = (yield [ops.retry_failed(user_id, cursor)])[0]
            cursor, count = reply
            retried += count
            if not cursor:
                return retried

    def get(self, task_id: str) -> Plan[TaskInfo | None]:
        """A task from whichever shard holds it, or None."""
        return self.found(lambda ops: ops.get(task_id))

    def get_record(self, record_id: str) -> Plan[Record | None]:
        """A record of any kind from whichever shard holds it, or None."""
        return self.found(lambda ops: ops.get_record(record_id))

    def stats(self, fairness_top: int) -> Plan[QueueStats]:
        """The stats of every shard, summed."""
        return self.each(
            lambda ops: ops.stats(fairness_top), lambda parts: merge_stats(parts, fairness_top)
        )

    def busiest_tenants(self, cursor: int, count: int) -> Plan[TenantStatsPage]:
        """A page of the tenants with ready tasks, shard after shard, each shard's busiest
        first."""
        if self.single is not None:
            return self.single.busiest_tenants(cursor, count)
        return self.paged(
            cursor, count, lambda ops, inner, wanted: ops.busiest_tenants(inner, wanted),
            lambda pages, cursor: TenantStatsPage(
                {t: v for p in pages for t, v in p.tenants.items()}, cursor
            ),
            lambda page: len(page.tenants),
        )  # fmt: skip

    def reap(self, limit: int) -> Plan[Maintenance]:
        """Maintenance on every shard."""
        return self.each(lambda ops: ops.reap(limit), merge_maintenance)

    def maintain(self, interval: float) -> Plan[Maintenance]:
        """A maintenance round on every shard where one is due."""
        return self.each(lambda ops: ops.maintain(None, interval), merge_maintenance)

    def next_due(self) -> Plan[float | None]:
        """The soonest of the shards' next due times."""
        return self.each(lambda ops: ops.next_due(), soonest)

    def backlog(self, tenants: int) -> Plan[Backlog]:
        """The shards' backlogs as one (a tenant lives on one shard)."""
        return self.each(
            lambda ops: ops.backlog(tenants),
            lambda parts: Backlog({t: age for part in parts for t, age in part.ages.items()}),
        )

    def promote(self, limit: int) -> Plan[int]:
        """Promotes due tasks on every shard."""
        return self.each(lambda ops: ops.promote(limit), sum)

    def namespace_settings(self) -> Call[QueueSettings]:
        """The settings the scripts apply (every shard is given the same ones)."""
        return settings_store.read(self.shards[0].namespace)

    def register_worker(self, worker: WorkerInfo, ttl: float) -> Plan[None]:
        """Registers a live worker on every shard (it serves them all)."""
        return self.each(lambda ops: ops.register_worker(worker, ttl), _nothing)

    def unregister_worker(self, worker_id: str) -> Plan[None]:
        """Takes a stopping worker out of every shard's registry."""
        return self.each(lambda ops: ops.unregister_worker(worker_id), _nothing)

    def workers(self) -> Plan[list[WorkerInfo]]:
        """The live workers, each once."""
        return self.each(lambda ops: ops.workers(), merge_workers)

    def limits(self, name: str) -> Plan[TaskLimits]:
        """A task name's limits: the same on every shard, which applies them to its own
        tenants' tasks; its running tasks summed over the shards."""
        return self.each(lambda ops: ops.limits(name), merge_limits)

    def set_limits(self, name: str, change: SharesChangeModel) -> Plan[TaskLimits]:
        """Changes a task name's limits on every shard."""
        return self.each(lambda ops: ops.set_limits(name, change), merge_limits)

    def names_with_limits(self, cursor: int, count: int) -> Plan[LimitsPage]:
        """A page of the task names with limits (every shard holds the same: the first's)."""
        return (self.single or self.shards[0]).names_with_limits(cursor, count)

    def tenants_with_shares(self, cursor: int, count: int) -> Plan[SharesPage]:
        """A page of the tenants with shares, shard after shard."""
        if self.single is not None:
            return self.single.tenants_with_shares(cursor, count)
        return self.paged(
            cursor, count, lambda ops, inner, wanted: ops.tenants_with_shares(inner, wanted),
            lambda pages, cursor: SharesPage([t for page in pages for t in page.tenants], cursor),
            lambda page: len(page.tenants),
        )  # fmt: skip

    def fairness(self, minutes: int, top: int) -> Plan[FairnessView]:
        """The shards' fairness views as one."""
        return self.each(
            lambda ops: ops.fairness(minutes, top), lambda parts: merge_fairness(parts, top)
        )

    def _lost_on_each(
        self,
        tasks: Sequence[LeasedTask],
        build: Callable[[QueueOps, list[int]], Call[list[str]]],
    ) -> Steps[list[str]]:
        """One call per shard of ``tasks``' tenants; the ids each says were lost."""
        calls = [build(ops, positions) for ops, positions in self.split(
            [task.user_id for task in tasks]
        )]  # fmt: skip
        parts = yield calls
        return [task_id for part in parts for task_id in part]


def _nothing(_replies: list[None]) -> None:
    return None
