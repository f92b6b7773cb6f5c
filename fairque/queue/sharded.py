"""Sharded queues: one logical fair queue over N namespaces ``<ns>:0`` .. ``<ns>:N-1``.

Each shard is a namespace of its own (keys ``fq:{<ns>:<i>}:...``), so on a cluster the
shards' slots spread over the nodes and each script still touches one slot. A tenant
lives on one shard, chosen by a stable hash of its name (CRC-32, the same in every
process and language), so its order and its dependencies stay within one namespace.

:class:`ShardedQueue` and :class:`AsyncShardedQueue` hold one queue per shard and cover
every shard in every method of :class:`~fairque.queue.protocol.Queue`: tasks go to their
tenant's shard, pops ask every shard in a rotating order, lists page through the shards
in turn, stats and maintenance add the shards up. Calls that name only a task id
(``get``, ``cancel``, ``retry``, XCom) look for the shard that holds it; calls that carry
a task (``finish``, ``fail``...) go straight to its tenant's shard. The asyncio queue
sends the calls of different shards concurrently.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import zlib
from collections.abc import Iterable, Sequence
from typing import Any

from fairque.config import QueueSettings
from fairque.engine.connect import AsyncClient, SyncClient
from fairque.engine.executor import AsyncClosing, AsyncExecutor, Closing, Executor
from fairque.engine.records import Record, TaskState
from fairque.errors import InvalidInput
from fairque.queue.client import (
    HAND_OVER_DELAY,
    MAINTENANCE_INTERVAL,
    UNSERVED_GRACE,
    AsyncFairQueue,
    FairQueue,
)
from fairque.queue.models import (
    STATS_TENANTS,
    FairnessView,
    LeasedTask,
    Maintenance,
    MaintenanceStatus,
    MinuteFigures,
    QueueStats,
    SharesPage,
    Task,
    TaskInfo,
    TaskPage,
    TenantShares,
    TenantStats,
    TenantStatsPage,
    WorkerInfo,
)
from fairque.queue.ops import STATS_FAIRNESS_TOP

MAX_SHARDS = 1024


def shard_namespaces(namespace: str, shards: int) -> list[str]:
    """The namespaces of a queue split in ``shards``: ``<namespace>:<i>``."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidInput("shards", f"must be 1 to {MAX_SHARDS}, not {shards!r}")
    return [f"{namespace}:{index}" for index in range(shards)]


def shard_index(tenant: str, shards: int) -> int:
    """The shard of ``tenant``: CRC-32 of its UTF-8 name, modulo ``shards``."""
    return zlib.crc32(tenant.encode()) % shards


def by_shard(tenants: Iterable[str], shards: int) -> dict[int, list[int]]:
    """Positions of ``tenants`` grouped by shard, in order within each shard."""
    groups: dict[int, list[int]] = {}
    for position, tenant in enumerate(tenants):
        groups.setdefault(shard_index(tenant, shards), []).append(position)
    return groups


class Rotation:
    """The order shards are asked for work: each pop starts one shard further, so every
    shard is asked first once every N pops and none is starved by a busy one. A pop
    takes what it can from the first shard and asks the next ones only for what is
    missing: one round trip while the first shard has enough."""

    def __init__(self, shards: int) -> None:
        self._starts = itertools.cycle(range(shards))
        self.shards = shards

    def next_order(self) -> list[int]:
        start = next(self._starts)
        return [(start + step) % self.shards for step in range(self.shards)]


def in_order(parts: dict[int, list[str]], groups: dict[int, list[int]], size: int) -> list[str]:
    """Per-shard replies (ids) put back in the order of the request they came from."""
    ordered = [""] * size
    for shard, positions in groups.items():
        for position, value in zip(positions, parts[shard], strict=True):
            ordered[position] = value
    return ordered


def split_cursor(cursor: int, shards: int) -> tuple[int, int]:
    """A sharded list's cursor as (shard, that shard's own cursor)."""
    inner, shard = divmod(cursor, shards)
    return shard, inner


def next_cursor(cursor: int, found: bool, shard: int, shards: int) -> int | None:
    """The sharded cursor after a page of ``shard`` that returned ``cursor`` and ``found``
    something or not; None to go on to the next shard at once (the shard is done and the
    page is empty)."""
    if cursor:
        return cursor * shards + shard
    if shard + 1 == shards:
        return 0
    return shard + 1 if found else None


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


def _tenants(tasks: Sequence[Task] | Sequence[LeasedTask]) -> list[str]:
    return [task.user_id for task in tasks]


class ShardedQueue(Closing):
    """One logical queue split over ``shards`` namespaces ``<namespace>:<i>``.

    >>> q = ShardedQueue("redis+cluster://10.0.0.1:6379", "jobs", shards=12)  # doctest: +SKIP
    >>> q.push(Task(user_id="alice"))  # goes to shard crc32("alice") % 12  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str | None = None,
        namespace: str = "default",
        *,
        shards: int,
        settings: QueueSettings | None = None,
        client: SyncClient | None = None,
        executor: Executor | None = None,
    ) -> None:
        names = shard_namespaces(namespace, shards)
        self.owns_executor = executor is None
        if executor is None:
            executor = Executor(client) if client is not None else Executor.connect(url)
        self.executor = executor
        self.shards = [FairQueue(namespace=name, settings=settings, executor=executor)
                       for name in names]  # fmt: skip
        self._rotation = Rotation(shards)

    @property
    def wake_channels(self) -> list[str]:
        """Every shard's wake channel (a worker subscribes to all)."""
        return [shard.namespace.wake_channel for shard in self.shards]

    def shard_for(self, tenant: str) -> FairQueue:
        """The shard that holds ``tenant``'s tasks."""
        return self.shards[shard_index(tenant, len(self.shards))]

    def _holding(self, task_id: str) -> FairQueue:
        """The shard that holds ``task_id`` (the first one if none does: it says so)."""
        found = (shard for shard in self.shards if shard.get_record(task_id) is not None)
        return next(found, self.shards[0])

    def push(self, task: Task, *, replicas: int = 0, replica_timeout: float = 1.0) -> str:
        """Enqueues one task on its tenant's shard; returns its id."""
        shard = self.shard_for(task.user_id)
        return shard.push(task, replicas=replicas, replica_timeout=replica_timeout)

    def push_many(
        self, tasks: Sequence[Task], *, replicas: int = 0, replica_timeout: float = 1.0
    ) -> list[str]:
        """Enqueues tasks, atomically per shard (all or none of each tenant's tasks)."""
        groups = by_shard(_tenants(tasks), len(self.shards))
        parts = {
            shard: self.shards[shard].push_many(
                [tasks[i] for i in positions], replicas=replicas, replica_timeout=replica_timeout
            )
            for shard, positions in groups.items()
        }
        return in_order(parts, groups, len(tasks))

    def pop(
        self,
        count: int = 1,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        worker_id: str | None = None,
        lease_seconds: float | None = None,
    ) -> list[LeasedTask]:
        """Leases up to ``count`` tasks, asking the shards in a rotating order."""
        got: list[LeasedTask] = []
        for shard in self._rotation.next_order():
            if len(got) >= count:
                break
            got += self.shards[shard].pop(
                count - len(got), assigned_users, steal_targets, worker_id, lease_seconds
            )
        return got

    def finish(self, task: LeasedTask, result: Any = None) -> None:
        """Finishes a task on its tenant's shard."""
        self.shard_for(task.user_id).finish(task, result)

    def finish_many(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None
    ) -> list[str]:
        """Finishes tasks, one call per shard; returns the ids whose lease was lost."""
        values = list(results) if results is not None else [None] * len(tasks)
        lost: list[str] = []
        for shard, positions in by_shard(_tenants(tasks), len(self.shards)).items():
            lost += self.shards[shard].finish_many(
                [tasks[i] for i in positions], [values[i] for i in positions]
            )
        return lost

    def release(self, tasks: Sequence[LeasedTask]) -> list[str]:
        """Hands tasks back, one call per shard; returns the ids whose lease was lost."""
        lost: list[str] = []
        for shard, positions in by_shard(_tenants(tasks), len(self.shards)).items():
            lost += self.shards[shard].release([tasks[i] for i in positions])
        return lost

    def fail(self, task: LeasedTask, error: str = "", *, retry: bool = True) -> TaskState:
        """Fails an attempt on its tenant's shard."""
        return self.shard_for(task.user_id).fail(task, error, retry=retry)

    def extend(self, task: LeasedTask, seconds: float) -> float:
        """Extends a lease on its tenant's shard."""
        return self.shard_for(task.user_id).extend(task, seconds)

    def cancel(self, task_id: str) -> bool:
        """Cancels a task on the shard that holds it."""
        return self._holding(task_id).cancel(task_id)

    def retry(self, task_id: str) -> bool:
        """Queues a failed task again on the shard that holds it."""
        return self._holding(task_id).retry(task_id)

    def xcom_push(self, task_id: str, key: str, value: Any, ttl: float | None = None) -> None:
        """Stores an XCom value on the shard that holds ``task_id``."""
        self._holding(task_id).xcom_push(task_id, key, value, ttl)

    def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Any:
        """Reads an XCom value from the shard that holds ``task_id``."""
        return self._holding(task_id).xcom_pull(task_id, key, default)

    def tasks(
        self,
        state: TaskState | str,
        user_id: str | None = None,
        name: str | None = None,
        cursor: int = 0,
        limit: int = 50,
    ) -> TaskPage:
        """A page of the tasks in ``state``, shard after shard (a tenant's: its shard's)."""
        if user_id is not None:
            return self.shard_for(user_id).tasks(state, user_id, name, cursor, limit)
        shards = len(self.shards)
        shard, inner = split_cursor(cursor, shards)
        while True:
            page = self.shards[shard].tasks(state, None, name, inner, limit)
            following = next_cursor(page.cursor, bool(page.tasks), shard, shards)
            if following is not None:
                return TaskPage(page.tasks, following)
            shard, inner = shard + 1, 0

    def retry_failed(self, user_id: str) -> int:
        """Queues every failed task of ``user_id`` again, on its shard."""
        return self.shard_for(user_id).retry_failed(user_id)

    def get(self, task_id: str) -> TaskInfo | None:
        """A task from whichever shard holds it, or None."""
        found = (info for shard in self.shards if (info := shard.get(task_id)) is not None)
        return next(found, None)

    def get_record(self, record_id: str) -> Record | None:
        """A record from whichever shard holds it, or None."""
        records = (shard.get_record(record_id) for shard in self.shards)
        return next((record for record in records if record is not None), None)

    def result(self, task_id: str, timeout: float | None = None) -> Any:
        """Waits for the task on the shard that holds it; see :meth:`FairQueue.result`."""
        return self._holding(task_id).result(task_id, timeout)

    def stats(self, fairness_top: int = STATS_FAIRNESS_TOP) -> QueueStats:
        """The shards' stats summed."""
        return merge_stats([shard.stats(fairness_top) for shard in self.shards], fairness_top)

    def busiest_tenants(self, cursor: int = 0, count: int = 50) -> TenantStatsPage:
        """A page of the tenants with ready tasks, shard after shard, each shard's busiest
        first."""
        shards = len(self.shards)
        shard, inner = split_cursor(cursor, shards)
        while True:
            page = self.shards[shard].busiest_tenants(inner, count)
            following = next_cursor(page.cursor, bool(page.tenants), shard, shards)
            if following is not None:
                return TenantStatsPage(page.tenants, following)
            shard, inner = shard + 1, 0

    def tenant_stats(self, tenant: str) -> TenantStats:
        """A tenant's figures, on its shard."""
        return self.shard_for(tenant).tenant_stats(tenant)

    def reap(self, limit: int = 1000) -> Maintenance:
        """Maintenance on every shard."""
        return merge_maintenance([shard.reap(limit) for shard in self.shards])

    def maintain(self, interval: float = MAINTENANCE_INTERVAL) -> Maintenance:
        """A maintenance round on every shard where one is due."""
        return merge_maintenance([shard.maintain(interval) for shard in self.shards])

    def next_due(self) -> float | None:
        """The soonest of the shards' next due times."""
        return soonest(shard.next_due() for shard in self.shards)

    def promote(self, limit: int = 1000) -> int:
        """Promotes due tasks on every shard."""
        return sum(shard.promote(limit) for shard in self.shards)

    def namespace_settings(self) -> QueueSettings:
        """The settings the shards' scripts apply (every shard is given the same ones)."""
        return self.shards[0].namespace_settings()

    def register_worker(self, worker: WorkerInfo, ttl: float) -> None:
        """Registers a live worker on every shard (it serves them all)."""
        for shard in self.shards:
            shard.register_worker(worker, ttl)

    def unregister_worker(self, worker_id: str) -> None:
        """Takes a stopping worker out of every shard's registry."""
        for shard in self.shards:
            shard.unregister_worker(worker_id)

    def workers(self) -> list[WorkerInfo]:
        """The live workers, each once."""
        return merge_workers([shard.workers() for shard in self.shards])

    def tenant(self, tenant: str) -> TenantShares:
        """A tenant's shares, on its shard."""
        return self.shard_for(tenant).tenant(tenant)

    def set_tenant(
        self,
        tenant: str,
        *,
        weight: int | None = None,
        concurrency: int | None = None,
        rate: int | None = None,
        period: float | None = None,
        paused: bool | None = None,
    ) -> TenantShares:
        """Changes a tenant's shares on its shard, where all its tasks are."""
        return self.shard_for(tenant).set_tenant(
            tenant, weight=weight, concurrency=concurrency, rate=rate, period=period, paused=paused
        )

    def tenants_with_shares(self, cursor: int = 0, count: int = 100) -> SharesPage:
        """A page of the tenants with shares, shard after shard."""
        shards = len(self.shards)
        shard, inner = split_cursor(cursor, shards)
        while True:
            page = self.shards[shard].tenants_with_shares(inner, count)
            following = next_cursor(page.cursor, bool(page.tenants), shard, shards)
            if following is not None:
                return SharesPage(page.tenants, following)
            shard, inner = shard + 1, 0

    def fairness(self, minutes: int = 5, top: int = 20) -> FairnessView:
        """The shards' fairness views as one."""
        return merge_fairness([shard.fairness(minutes, top) for shard in self.shards], top)

    def hand_over(
        self,
        tasks: Sequence[LeasedTask],
        delay: float = HAND_OVER_DELAY,
        grace: float = UNSERVED_GRACE,
    ) -> list[str]:
        """Gives back tasks whose function this worker lacks, one call per shard."""
        lost: list[str] = []
        for shard, positions in by_shard(_tenants(tasks), len(self.shards)).items():
            lost += self.shards[shard].hand_over([tasks[i] for i in positions], delay, grace)
        return lost


class AsyncShardedQueue(AsyncClosing):
    """:class:`ShardedQueue` for asyncio: every method is a coroutine."""

    def __init__(
        self,
        url: str | None = None,
        namespace: str = "default",
        *,
        shards: int,
        settings: QueueSettings | None = None,
        client: AsyncClient | None = None,
        executor: AsyncExecutor | None = None,
    ) -> None:
        names = shard_namespaces(namespace, shards)
        self.owns_executor = executor is None
        if executor is None:
            executor = AsyncExecutor(client) if client is not None else AsyncExecutor.connect(url)
        self.executor = executor
        self.shards = [AsyncFairQueue(namespace=name, settings=settings, executor=executor)
                       for name in names]  # fmt: skip
        self._rotation = Rotation(shards)

    @property
    def wake_channels(self) -> list[str]:
        """Every shard's wake channel (a worker subscribes to all)."""
        return [shard.namespace.wake_channel for shard in self.shards]

    async def close(self) -> None:
        """Waits until the pushes made so far are answered (each shard's ``close``,
        which leaves the shared pool open), then closes the pool if this queue opened it."""
        for shard in self.shards:
            await shard.close()
        await super().close()

    def shard_for(self, tenant: str) -> AsyncFairQueue:
        """The shard that holds ``tenant``'s tasks."""
        return self.shards[shard_index(tenant, len(self.shards))]

    async def _holding(self, task_id: str) -> AsyncFairQueue:
        """The shard that holds ``task_id`` (the first one if none does: it says so)."""
        records = await asyncio.gather(*(shard.get_record(task_id) for shard in self.shards))
        found = (shard for shard, got in zip(self.shards, records, strict=True) if got is not None)
        return next(found, self.shards[0])

    async def push(self, task: Task, *, replicas: int = 0, replica_timeout: float = 1.0) -> str:
        """Enqueues one task on its tenant's shard; returns its id."""
        shard = self.shard_for(task.user_id)
        return await shard.push(task, replicas=replicas, replica_timeout=replica_timeout)

    async def push_many(
        self, tasks: Sequence[Task], *, replicas: int = 0, replica_timeout: float = 1.0
    ) -> list[str]:
        """Enqueues tasks, atomically per shard (all or none of each tenant's tasks)."""
        groups = by_shard(_tenants(tasks), len(self.shards))
        replies = await asyncio.gather(*(
            self.shards[shard].push_many(
                [tasks[i] for i in positions], replicas=replicas, replica_timeout=replica_timeout
            )
            for shard, positions in groups.items()
        ))  # fmt: skip
        return in_order(dict(zip(groups, replies, strict=True)), groups, len(tasks))

    async def pop(
        self,
        count: int = 1,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        worker_id: str | None = None,
        lease_seconds: float | None = None,
    ) -> list[LeasedTask]:
        """Leases up to ``count`` tasks, asking the shards in a rotating order."""
        got: list[LeasedTask] = []
        for shard in self._rotation.next_order():
            if len(got) >= count:
                break
            got += await self.shards[shard].pop(
                count - len(got), assigned_users, steal_targets, worker_id, lease_seconds
            )
        return got

    async def finish(self, task: LeasedTask, result: Any = None) -> None:
        """Finishes a task on its tenant's shard."""
        await self.shard_for(task.user_id).finish(task, result)

    async def finish_many(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None
    ) -> list[str]:
        """Finishes tasks, one call per shard; returns the ids whose lease was lost."""
        values = list(results) if results is not None else [None] * len(tasks)
        groups = by_shard(_tenants(tasks), len(self.shards))
        lost = await asyncio.gather(*(
            self.shards[shard].finish_many(
                [tasks[i] for i in positions], [values[i] for i in positions]
            )
            for shard, positions in groups.items()
        ))  # fmt: skip
        return [task_id for part in lost for task_id in part]

    async def release(self, tasks: Sequence[LeasedTask]) -> list[str]:
        """Hands tasks back, one call per shard; returns the ids whose lease was lost."""
        groups = by_shard(_tenants(tasks), len(self.shards))
        lost = await asyncio.gather(*(
            self.shards[shard].release([tasks[i] for i in positions])
            for shard, positions in groups.items()
        ))  # fmt: skip
        return [task_id for part in lost for task_id in part]

    async def fail(self, task: LeasedTask, error: str = "", *, retry: bool = True) -> TaskState:
        """Fails an attempt on its tenant's shard."""
        return await self.shard_for(task.user_id).fail(task, error, retry=retry)

    async def extend(self, task: LeasedTask, seconds: float) -> float:
        """Extends a lease on its tenant's shard."""
        return await self.shard_for(task.user_id).extend(task, seconds)

    async def cancel(self, task_id: str) -> bool:
        """Cancels a task on the shard that holds it."""
        return await (await self._holding(task_id)).cancel(task_id)

    async def retry(self, task_id: str) -> bool:
        """Queues a failed task again on the shard that holds it."""
        return await (await self._holding(task_id)).retry(task_id)

    async def xcom_push(self, task_id: str, key: str, value: Any, ttl: float | None = None) -> None:
        """Stores an XCom value on the shard that holds ``task_id``."""
        await (await self._holding(task_id)).xcom_push(task_id, key, value, ttl)

    async def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Any:
        """Reads an XCom value from the shard that holds ``task_id``."""
        return await (await self._holding(task_id)).xcom_pull(task_id, key, default)

    async def tasks(
        self,
        state: TaskState | str,
        user_id: str | None = None,
        name: str | None = None,
        cursor: int = 0,
        limit: int = 50,
    ) -> TaskPage:
        """A page of the tasks in ``state``, shard after shard (a tenant's: its shard's)."""
        if user_id is not None:
            return await self.shard_for(user_id).tasks(state, user_id, name, cursor, limit)
        shards = len(self.shards)
        shard, inner = split_cursor(cursor, shards)
        while True:
            page = await self.shards[shard].tasks(state, None, name, inner, limit)
            following = next_cursor(page.cursor, bool(page.tasks), shard, shards)
            if following is not None:
                return TaskPage(page.tasks, following)
            shard, inner = shard + 1, 0

    async def retry_failed(self, user_id: str) -> int:
        """Queues every failed task of ``user_id`` again, on its shard."""
        return await self.shard_for(user_id).retry_failed(user_id)

    async def get(self, task_id: str) -> TaskInfo | None:
        """A task from whichever shard holds it, or None."""
        infos = await asyncio.gather(*(shard.get(task_id) for shard in self.shards))
        return next((info for info in infos if info is not None), None)

    async def get_record(self, record_id: str) -> Record | None:
        """A record from whichever shard holds it, or None."""
        records = await asyncio.gather(*(shard.get_record(record_id) for shard in self.shards))
        return next((record for record in records if record is not None), None)

    async def result(self, task_id: str, timeout: float | None = None) -> Any:
        """Waits for the task on the shard that holds it; see :meth:`FairQueue.result`."""
        return await (await self._holding(task_id)).result(task_id, timeout)

    async def stats(self, fairness_top: int = STATS_FAIRNESS_TOP) -> QueueStats:
        """The shards' stats summed."""
        parts = await asyncio.gather(*(shard.stats(fairness_top) for shard in self.shards))
        return merge_stats(parts, fairness_top)

    async def busiest_tenants(self, cursor: int = 0, count: int = 50) -> TenantStatsPage:
        """A page of the tenants with ready tasks, shard after shard, each shard's busiest
        first."""
        shards = len(self.shards)
        shard, inner = split_cursor(cursor, shards)
        while True:
            page = await self.shards[shard].busiest_tenants(inner, count)
            following = next_cursor(page.cursor, bool(page.tenants), shard, shards)
            if following is not None:
                return TenantStatsPage(page.tenants, following)
            shard, inner = shard + 1, 0

    async def tenant_stats(self, tenant: str) -> TenantStats:
        """A tenant's figures, on its shard."""
        return await self.shard_for(tenant).tenant_stats(tenant)

    async def reap(self, limit: int = 1000) -> Maintenance:
        """Maintenance on every shard."""
        parts = await asyncio.gather(*(shard.reap(limit) for shard in self.shards))
        return merge_maintenance(parts)

    async def maintain(self, interval: float = MAINTENANCE_INTERVAL) -> Maintenance:
        """A maintenance round on every shard where one is due."""
        parts = await asyncio.gather(*(shard.maintain(interval) for shard in self.shards))
        return merge_maintenance(parts)

    async def next_due(self) -> float | None:
        """The soonest of the shards' next due times."""
        return soonest(await asyncio.gather(*(shard.next_due() for shard in self.shards)))

    async def promote(self, limit: int = 1000) -> int:
        """Promotes due tasks on every shard."""
        return sum(await asyncio.gather(*(shard.promote(limit) for shard in self.shards)))

    async def namespace_settings(self) -> QueueSettings:
        """The settings the shards' scripts apply (every shard is given the same ones)."""
        return await self.shards[0].namespace_settings()

    async def register_worker(self, worker: WorkerInfo, ttl: float) -> None:
        """Registers a live worker on every shard (it serves them all)."""
        await asyncio.gather(*(shard.register_worker(worker, ttl) for shard in self.shards))

    async def unregister_worker(self, worker_id: str) -> None:
        """Takes a stopping worker out of every shard's registry."""
        await asyncio.gather(*(shard.unregister_worker(worker_id) for shard in self.shards))

    async def workers(self) -> list[WorkerInfo]:
        """The live workers, each once."""
        return merge_workers(await asyncio.gather(*(shard.workers() for shard in self.shards)))

    async def tenant(self, tenant: str) -> TenantShares:
        """A tenant's shares, on its shard."""
        return await self.shard_for(tenant).tenant(tenant)

    async def set_tenant(
        self,
        tenant: str,
        *,
        weight: int | None = None,
        concurrency: int | None = None,
        rate: int | None = None,
        period: float | None = None,
        paused: bool | None = None,
    ) -> TenantShares:
        """Changes a tenant's shares on its shard, where all its tasks are."""
        return await self.shard_for(tenant).set_tenant(
            tenant, weight=weight, concurrency=concurrency, rate=rate, period=period, paused=paused
        )

    async def tenants_with_shares(self, cursor: int = 0, count: int = 100) -> SharesPage:
        """A page of the tenants with shares, shard after shard."""
        shards = len(self.shards)
        shard, inner = split_cursor(cursor, shards)
        while True:
            page = await self.shards[shard].tenants_with_shares(inner, count)
            following = next_cursor(page.cursor, bool(page.tenants), shard, shards)
            if following is not None:
                return SharesPage(page.tenants, following)
            shard, inner = shard + 1, 0

    async def fairness(self, minutes: int = 5, top: int = 20) -> FairnessView:
        """The shards' fairness views as one."""
        parts = await asyncio.gather(*(shard.fairness(minutes, top) for shard in self.shards))
        return merge_fairness(parts, top)

    async def hand_over(
        self,
        tasks: Sequence[LeasedTask],
        delay: float = HAND_OVER_DELAY,
        grace: float = UNSERVED_GRACE,
    ) -> list[str]:
        """Gives back tasks whose function this worker lacks, one call per shard."""
        groups = by_shard(_tenants(tasks), len(self.shards))
        lost = await asyncio.gather(*(
            self.shards[shard].hand_over([tasks[i] for i in positions], delay, grace)
            for shard, positions in groups.items()
        ))  # fmt: skip
        return [task_id for part in lost for task_id in part]


def open_queue(
    url: str | None,
    namespace: str,
    shards: int = 1,
    *,
    settings: QueueSettings | None = None,
    executor: Executor | None = None,
) -> FairQueue | ShardedQueue:
    """A :class:`FairQueue`, or a :class:`ShardedQueue` when ``shards`` > 1."""
    if shards > 1:
        return ShardedQueue(url, namespace, shards=shards, settings=settings, executor=executor)
    return FairQueue(url, namespace, settings=settings, executor=executor)


def open_async_queue(
    url: str | None,
    namespace: str,
    shards: int = 1,
    *,
    settings: QueueSettings | None = None,
    executor: AsyncExecutor | None = None,
) -> AsyncFairQueue | AsyncShardedQueue:
    """An :class:`AsyncFairQueue`, or an :class:`AsyncShardedQueue` when ``shards`` > 1."""
    if shards > 1:
        return AsyncShardedQueue(
            url, namespace, shards=shards, settings=settings, executor=executor
        )
    return AsyncFairQueue(url, namespace, settings=settings, executor=executor)
