"""Sharded queues: :class:`ShardedQueue` and :class:`AsyncShardedQueue`.

The same interface as :class:`FairQueue` over N shard namespaces (see
:mod:`fairque.sharding`): tasks go to their tenant's shard, pops ask every shard in a
rotating order, stats and maintenance add the shards up. Calls that name only a task id
(``get``, ``cancel``, ``retry``, XCom) look for the shard that holds it, one ``get`` per
shard; calls that carry a task (``finish``, ``fail``...) go straight to its tenant's shard.
The asyncio queue sends the calls of different shards concurrently (one round trip).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from fairque.client.aio import AsyncFairQueue
from fairque.client.connect import AsyncClient, SyncClient
from fairque.client.sync import FairQueue
from fairque.config import QueueSettings
from fairque.models import LeasedTask, QueueStats, Task, TaskInfo, TaskState
from fairque.ops import Maintenance
from fairque.sharding import (
    Rotation,
    by_shard,
    in_order,
    merge_maintenance,
    merge_stats,
    shard_index,
    shard_namespaces,
    soonest,
)

Q = TypeVar("Q", FairQueue, AsyncFairQueue)


class _Shards(Generic[Q]):
    """What both sharded queues know: their shards and which one holds a tenant."""

    shards: list[Q]

    @property
    def wake_channels(self) -> list[str]:
        """Every shard's wake channel (a worker subscribes to all)."""
        return [shard.ops.wake_channel for shard in self.shards]

    def shard_for(self, tenant: str) -> Q:
        """The shard that holds ``tenant``'s tasks."""
        return self.shards[shard_index(tenant, len(self.shards))]


def _tenants(tasks: Sequence[Task] | Sequence[LeasedTask]) -> list[str]:
    return [task.user_id for task in tasks]


class ShardedQueue(_Shards[FairQueue], FairQueue):
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
    ) -> None:
        names = shard_namespaces(namespace, shards)
        super().__init__(url, names[0], settings=settings, client=client)
        self.shards = [FairQueue(namespace=name, settings=settings, client=self.redis)
                       for name in names]  # fmt: skip
        self._rotation = Rotation(shards)

    def _holding(self, task_id: str) -> FairQueue:
        """The shard that holds ``task_id`` (the first one if none does: it says so)."""
        found = (shard for shard in self.shards if shard.get(task_id) is not None)
        return next(found, self.shards[0])

    def push(self, task: Task, *, replicas: int = 0, replica_timeout: float = 1.0) -> str:
        return self.shard_for(task.user_id).push(
            task, replicas=replicas, replica_timeout=replica_timeout
        )

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
        got: list[LeasedTask] = []
        order = self._rotation.next_order()
        for shard in order:
            if len(got) >= count:
                break
            got += self.shards[shard].pop(
                count - len(got), assigned_users, steal_targets, worker_id, lease_seconds
            )
        return got

    def finish(self, task: LeasedTask, result: Any = None) -> None:
        self.shard_for(task.user_id).finish(task, result)

    def finish_many(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None
    ) -> list[str]:
        values = list(results) if results is not None else [None] * len(tasks)
        lost: list[str] = []
        for shard, positions in by_shard(_tenants(tasks), len(self.shards)).items():
            lost += self.shards[shard].finish_many(
                [tasks[i] for i in positions], [values[i] for i in positions]
            )
        return lost

    def release(self, tasks: Sequence[LeasedTask]) -> list[str]:
        lost: list[str] = []
        for shard, positions in by_shard(_tenants(tasks), len(self.shards)).items():
            lost += self.shards[shard].release([tasks[i] for i in positions])
        return lost

    def fail(self, task: LeasedTask, error: str = "", *, retry: bool = True) -> TaskState:
        return self.shard_for(task.user_id).fail(task, error, retry=retry)

    def extend(self, task: LeasedTask, seconds: float) -> float:
        return self.shard_for(task.user_id).extend(task, seconds)

    def cancel(self, task_id: str) -> bool:
        return self._holding(task_id).cancel(task_id)

    def retry(self, task_id: str) -> bool:
        return self._holding(task_id).retry(task_id)

    def xcom_push(self, task_id: str, key: str, value: Any, ttl: float | None = None) -> None:
        self._holding(task_id).xcom_push(task_id, key, value, ttl)

    def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Any:
        return self._holding(task_id).xcom_pull(task_id, key, default)

    def get(self, task_id: str) -> TaskInfo | None:
        found = (info for shard in self.shards if (info := shard.get(task_id)) is not None)
        return next(found, None)

    def stats(self) -> QueueStats:
        """The shards' stats summed."""
        return merge_stats([shard.stats() for shard in self.shards])

    def reap(self, limit: int = 1000) -> Maintenance:
        return merge_maintenance([shard.reap(limit) for shard in self.shards])

    def next_due(self) -> float | None:
        return soonest(shard.next_due() for shard in self.shards)

    def promote(self, limit: int = 1000) -> int:
        return sum(shard.promote(limit) for shard in self.shards)


class AsyncShardedQueue(_Shards[AsyncFairQueue], AsyncFairQueue):
    """:class:`ShardedQueue` for asyncio: every method is a coroutine."""

    def __init__(
        self,
        url: str | None = None,
        namespace: str = "default",
        *,
        shards: int,
        settings: QueueSettings | None = None,
        client: AsyncClient | None = None,
    ) -> None:
        names = shard_namespaces(namespace, shards)
        super().__init__(url, names[0], settings=settings, client=client)
        self.shards = [AsyncFairQueue(namespace=name, settings=settings, client=self.redis)
                       for name in names]  # fmt: skip
        self._rotation = Rotation(shards)

    async def _holding(self, task_id: str) -> AsyncFairQueue:
        """The shard that holds ``task_id`` (the first one if none does: it says so)."""
        infos = await asyncio.gather(*(shard.get(task_id) for shard in self.shards))
        found = (shard for shard, info in zip(self.shards, infos, strict=True) if info is not None)
        return next(found, self.shards[0])

    async def push(self, task: Task, *, replicas: int = 0, replica_timeout: float = 1.0) -> str:
        return await self.shard_for(task.user_id).push(
            task, replicas=replicas, replica_timeout=replica_timeout
        )

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
        got: list[LeasedTask] = []
        order = self._rotation.next_order()
        for shard in order:
            if len(got) >= count:
                break
            got += await self.shards[shard].pop(
                count - len(got), assigned_users, steal_targets, worker_id, lease_seconds
            )
        return got

    async def finish(self, task: LeasedTask, result: Any = None) -> None:
        await self.shard_for(task.user_id).finish(task, result)

    async def finish_many(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None
    ) -> list[str]:
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
        groups = by_shard(_tenants(tasks), len(self.shards))
        lost = await asyncio.gather(*(
            self.shards[shard].release([tasks[i] for i in positions])
            for shard, positions in groups.items()
        ))  # fmt: skip
        return [task_id for part in lost for task_id in part]

    async def fail(self, task: LeasedTask, error: str = "", *, retry: bool = True) -> TaskState:
        return await self.shard_for(task.user_id).fail(task, error, retry=retry)

    async def extend(self, task: LeasedTask, seconds: float) -> float:
        return await self.shard_for(task.user_id).extend(task, seconds)

    async def cancel(self, task_id: str) -> bool:
        return await (await self._holding(task_id)).cancel(task_id)

    async def retry(self, task_id: str) -> bool:
        return await (await self._holding(task_id)).retry(task_id)

    async def xcom_push(self, task_id: str, key: str, value: Any, ttl: float | None = None) -> None:
        await (await self._holding(task_id)).xcom_push(task_id, key, value, ttl)

    async def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Any:
        return await (await self._holding(task_id)).xcom_pull(task_id, key, default)

    async def get(self, task_id: str) -> TaskInfo | None:
        infos = await asyncio.gather(*(shard.get(task_id) for shard in self.shards))
        return next((info for info in infos if info is not None), None)

    async def stats(self) -> QueueStats:
        """The shards' stats summed."""
        return merge_stats(await asyncio.gather(*(shard.stats() for shard in self.shards)))

    async def reap(self, limit: int = 1000) -> Maintenance:
        parts = await asyncio.gather(*(shard.reap(limit) for shard in self.shards))
        return merge_maintenance(parts)

    async def next_due(self) -> float | None:
        return soonest(await asyncio.gather(*(shard.next_due() for shard in self.shards)))

    async def promote(self, limit: int = 1000) -> int:
        return sum(await asyncio.gather(*(shard.promote(limit) for shard in self.shards)))


def open_queue(url: str | None, namespace: str, shards: int = 1) -> FairQueue:
    """A :class:`FairQueue`, or a :class:`ShardedQueue` when ``shards`` > 1."""
    if shards > 1:
        return ShardedQueue(url, namespace, shards=shards)
    return FairQueue(url, namespace)


def open_async_queue(url: str | None, namespace: str, shards: int = 1) -> AsyncFairQueue:
    """An :class:`AsyncFairQueue`, or an :class:`AsyncShardedQueue` when ``shards`` > 1."""
    if shards > 1:
        return AsyncShardedQueue(url, namespace, shards=shards)
    return AsyncFairQueue(url, namespace)
