"""Where the fair-queue operations run (:mod:`fairque.engine.shards`), over one namespace
or the shards of one queue: the policy :meth:`QueuePlans.by_tenant`, the plans that have
logic of their own (a pop over the shards in turn, a list paged through them), and how
the shards' replies merge. Each operation of the clients (:mod:`fairque.queue.async_client`,
and :mod:`fairque.queue.client` generated from it) names its policy and call builder
(:mod:`fairque.queue.calls`) in one declaration, for the blocking and asyncio clients
alike.

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
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

from fairque.engine.calls import Call
from fairque.engine.keys import Namespace
from fairque.engine.records import TaskState, check_identifier
from fairque.engine.shards import Plan, ShardPlans, Steps, merged, shard_index
from fairque.errors import InvalidInput, ServerUnavailable
from fairque.queue.calls import bulk as bulk_calls
from fairque.queue.calls import leases, maintenance, workers
from fairque.queue.calls import tasks as task_calls
from fairque.queue.calls.leases import MIN_POP_WAIT, Leased
from fairque.queue.models import (
    STATS_TENANTS,
    Backlog,
    BulkAction,
    BulkBatch,
    FairnessView,
    LeasedTask,
    Maintenance,
    MaintenanceStatus,
    MinuteFigures,
    QueueStats,
    Selector,
    TaskLimits,
    TaskPage,
    TenantStats,
    WorkerInfo,
    WorkerUpkeep,
)

T = TypeVar("T")
A = ParamSpec("A")


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


def merge_upkeep(parts: Sequence[WorkerUpkeep]) -> WorkerUpkeep:
    """A worker's upkeep on all shards: registered on each, work due on the first."""
    return WorkerUpkeep(
        registered=all(part.registered for part in parts),
        next_due=soonest(part.next_due for part in parts),
        ready=any(part.ready for part in parts),
        round_due=any(part.round_due for part in parts),
    )


def soonest(dues: Iterable[float | None]) -> float | None:
    """The earliest of the shards' next-due delays; None if no shard has anything due."""
    return min((due for due in dues if due is not None), default=None)


def merge_backlogs(parts: Sequence[Backlog]) -> Backlog:
    """The shards' backlogs as one (a tenant lives on one shard)."""
    return Backlog({tenant: age for part in parts for tenant, age in part.ages.items()})


def nothing(_replies: Sequence[None]) -> None:
    """The replies of a call that answers nothing, on every shard."""


def merge_workers(parts: Sequence[Sequence[WorkerInfo]]) -> list[WorkerInfo]:
    """The workers registered on the shards (each registers on all), each once."""
    latest: dict[str, WorkerInfo] = {}
    for part in parts:
        for worker in part:
            known = latest.get(worker.worker_id)
            if known is None or worker.seen_at > known.seen_at:
                latest[worker.worker_id] = worker
    return [latest[worker_id] for worker_id in sorted(latest)]


class QueuePlans(ShardPlans[Namespace]):
    """Where the fair queue's operations run over ``namespaces``: one (a
    :class:`~fairque.FairQueue`) or the shards of one queue (a
    :class:`~fairque.ShardedQueue`). Each shard is its :class:`Namespace`, which the call
    builders of :mod:`fairque.queue.calls` take first. The policies of
    :class:`~fairque.engine.shards.ShardPlans`, :meth:`by_tenant` and :meth:`by_tasks`
    serve the operations that only choose shards; the other plans here have logic of
    their own."""

    def __init__(self, namespaces: Sequence[str]) -> None:
        shards = [Namespace(name) for name in namespaces]
        super().__init__(shards, shards)

    def shard_of(self, tenant: str) -> int:
        """The index of the shard that holds ``tenant``'s tasks."""
        if self.single is not None:
            return 0
        try:
            return shard_index(check_identifier(tenant), len(self.shards))
        except ValueError as exc:
            raise InvalidInput("user_id", str(exc)) from None

    def by_tenant(
        self,
        tenant: str,
        build: Callable[Concatenate[Namespace, A], Call[T]],
        *args: A.args,
        **kwargs: A.kwargs,
    ) -> Call[T]:
        """The call on the shard that holds ``tenant``'s tasks."""
        return build(self.shards[self.shard_of(tenant)], *args, **kwargs)

    def by_tasks(
        self,
        tasks: Sequence[LeasedTask],
        build: Callable[Concatenate[Namespace, list[LeasedTask], A], Call[list[str]]],
        *args: A.args,
        **kwargs: A.kwargs,
    ) -> Plan[list[str]]:
        """The call on the shard of each of ``tasks``' tenants, given its tasks; the ids
        the calls say were lost."""
        if self.single is not None:
            return build(self.single, list(tasks), *args, **kwargs)
        calls = [
            build(shard, [tasks[i] for i in positions], *args, **kwargs)
            for shard, positions in self.split([task.user_id for task in tasks])
        ]
        return merged(calls, _concatenated)

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
        lease: dict[str, Any] = {  # the pop's arguments, after its count
            "assigned_users": assigned_users,
            "steal_targets": steal_targets,
            "worker_id": worker_id,
            "lease_seconds": lease_seconds,
            "names": names,
        }
        if wait is not None:
            if self.single is None:
                raise InvalidInput(
                    "wait", "a sharded queue's pop cannot wait: use its wake_channels"
                )
            return (yield from self._pop_waiting(self.single, count, lease, wait))
        got: list[LeasedTask] = []
        away: ServerUnavailable | None = None  # a shard's server, failing over perhaps
        for index in [0] if self.single is not None else self.rotation.next_order():
            namespace = self.shards[index]
            wanted = count - len(got) if got else count  # as given: the call checks it
            call = leases.pop(namespace, wanted, **lease)
            if self.single is not None:
                return (yield from self._leased(namespace, call))  # as the script returned it
            try:
                leased: Leased = yield from self._leased(namespace, call)
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
    def _leased(namespace: Namespace, call: Call[Leased]) -> Steps[Leased]:
        """Sends a pop; fails the tasks whose record it could not read."""
        leased: Leased = (yield [call])[0]
        yield from QueuePlans._fail_unreadable(namespace, leased)
        return leased

    @staticmethod
    def _fail_unreadable(namespace: Namespace, leased: Leased) -> Steps[None]:
        """Fails the tasks a pop leased but could not read (their errors name the field)."""
        if leased.unreadable:
            yield [
                leases.fail_unreadable(namespace, unreadable) for unreadable in leased.unreadable
            ]

    def _pop_waiting(
        self, namespace: Namespace, count: int, lease: dict[str, Any], wait: float
    ) -> Steps[Leased]:
        """A pop that waits up to ``wait`` s for a tenant to become servable: for a push
        (the wake-up token), and no longer than until work comes due without one (a
        delayed task, a retry backoff, a rate window opening), which the pop itself
        makes ready. A wait that ends early (a push another worker took first, or
        ``stop_waiting``) ends the pop; one that ran to a due time goes on waiting."""
        leases.pop(
            namespace, count, wait=wait, **lease
        )  # checks every argument before anything is sent
        deadline = time.monotonic() + wait
        while True:
            due = (yield [maintenance.next_due(namespace, leases=False)])[0]
            left = deadline - time.monotonic()
            seconds = max(MIN_POP_WAIT, left if due is None else min(left, due))
            started = time.monotonic()
            leased = yield from self.pop_after_wait(namespace, count, lease, seconds)
            waited = time.monotonic() - started
            if leased or seconds >= left or waited < seconds:
                return leased

    def pop_after_wait(
        self, namespace: Namespace, count: int, lease: dict[str, Any], wait: float
    ) -> Steps[Leased]:
        """One wait of up to ``wait`` s for a wake-up token of the lanes the pop serves,
        and the pop behind it, in one pipeline: the pop runs the moment work arrives. The
        caller bounds ``wait`` by when work comes due (a pop makes due work ready)."""
        return (
            yield from self._leased(namespace, leases.pop(namespace, count, wait=wait, **lease))
        )

    def idle_pop(
        self, namespace: Namespace, wait: float, count: int, idle: dict[str, Any]
    ) -> Steps[tuple[Leased, WorkerUpkeep | None]]:
        """An idle worker's wait, and its pop behind it that is also its upkeep when it
        leases nothing (:func:`~fairque.queue.calls.workers.idle_pop`, whose keyword
        arguments ``idle`` holds)."""
        leased, upkept = (yield [workers.idle_pop(namespace, wait, count, **idle)])[0]
        yield from self._fail_unreadable(namespace, leased)
        return leased, upkept

    def finish(self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None) -> Plan[list[str]]:
        """Finishes tasks, one call per shard; the ids whose lease was lost."""
        if self.single is not None:
            return leases.finish(self.single, tasks, results)
        values = list(results) if results is not None else [None] * len(tasks)
        calls = [
            leases.finish(shard, [tasks[i] for i in positions], [values[i] for i in positions])
            for shard, positions in self.split([task.user_id for task in tasks])
        ]
        return merged(calls, _concatenated)

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
        namespace = self.single
        if namespace is None:  # the tasks' shards and the pop's are not one slot
            raise InvalidInput("tasks", "a sharded queue finishes and pops in separate calls")
        call = leases.finish_and_pop(
            namespace, tasks, results, count=count, assigned_users=assigned_users,
            steal_targets=steal_targets, worker_id=worker_id, lease_seconds=lease_seconds,
            names=names,
        )  # fmt: skip
        lost, leased = (yield [call])[0]
        yield from self._fail_unreadable(namespace, leased)
        return lost, leased

    def tasks(
        self,
        state: TaskState | str,
        user_id: str | None,
        name: str | None,
        cursor: int,
        limit: int,
    ) -> Plan[TaskPage]:
        """A page of the tasks in ``state``, shard after shard (a tenant's: its shard's)."""
        if user_id is not None:
            return self.by_tenant(
                user_id, task_calls.tasks, state, cursor, limit, user_id=user_id, name=name
            )
        return self.paged(TaskPage, cursor, limit, task_calls.tasks, state, name=name)

    def retry_failed(self, user_id: str) -> Steps[int]:
        """Queues every FAILED task of ``user_id`` again, a batch per call; how many."""
        selector = Selector(TaskState.FAILED, user_id)
        retried, cursor = 0, ""
        while True:
            batch = yield from self.bulk(BulkAction.RETRY, selector, cursor)
            retried += batch.selected
            if batch.cursor is None:
                return retried
            cursor = batch.cursor

    def bulk(
        self,
        action: BulkAction | str,
        selector: Selector,
        cursor: str = "",
        size: int = bulk_calls.BULK_BATCH,
        *,
        dry_run: bool = False,
    ) -> Steps[BulkBatch]:
        """One batch of a bulk operation (:mod:`fairque.queue.calls.bulk`): its passes go
        through the states it takes on each shard it visits (a tenant's: its shard)."""
        action = bulk_calls.action_of(action)
        if not isinstance(selector, Selector):
            raise InvalidInput("selector", f"must be a Selector, got {type(selector).__name__}")
        bulk_calls.check_batch(size)
        states = bulk_calls.states_of(action, selector)
        shards = (
            [self.shard_of(selector.user_id)]
            if selector.user_id is not None
            else range(len(self.shards))
        )
        passes = [(shard, state) for shard in shards for state in states]
        at, position, as_of = bulk_calls.read_cursor(cursor)
        if at >= len(passes):
            return BulkBatch(None, 0, 0, states[-1], 0)
        shard, state = passes[at]
        call = bulk_calls.batch(
            self.shards[shard], action, selector, state,
            position=position, as_of=as_of, size=size, dry_run=dry_run,
        )  # fmt: skip
        reply = (yield [call])[0]
        return bulk_calls.next_batch(at, len(passes), state, reply)


def _concatenated(parts: list[list[str]]) -> list[str]:
    return [entry for part in parts for entry in part]
