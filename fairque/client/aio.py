"""The asyncio client: the same facade as :mod:`fairque.client.sync`, as coroutines."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any, TypeVar

from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fairque.client import replicated
from fairque.client.connect import AsyncClient, async_client
from fairque.config import QueueSettings, redis_url
from fairque.models import LeasedTask, QueueStats, Task, TaskInfo, TaskPage, TaskState
from fairque.ops import Call, Maintenance, Ops

T = TypeVar("T")
Q = TypeVar("Q", bound="AsyncFairQueue")  # a subclass enters as itself


class AsyncFairQueue:
    """:class:`fairque.FairQueue` for asyncio: every method is a coroutine.

    >>> q = AsyncFairQueue()  # doctest: +SKIP
    >>> await q.push(Task(user_id="alice", payload={"n": 1}))  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str | None = None,
        namespace: str = "default",
        *,
        settings: QueueSettings | None = None,
        client: AsyncClient | None = None,
    ) -> None:
        self.ops = Ops(namespace, settings or QueueSettings())
        # Like redis-py's blocking client: a command on a connection that died (e.g. the
        # server restarted) is retried on a new one. Scripts refuse a duplicate effect.
        self.redis = client or async_client(
            redis_url(url),
            retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), 3),
            retry_on_error=[RedisConnectionError, RedisTimeoutError],
        )

    async def execute(self, call: Call[T]) -> T:
        """Sends a call built by :mod:`fairque.ops` (or :mod:`fairque.jobs`); its parsed reply."""
        return await self._run(call)

    @property
    def wake_channels(self) -> list[str]:
        """The sharded pub/sub channels published when tasks become ready."""
        return [self.ops.wake_channel]

    async def _run(self, call: Call[T]) -> T:
        keys_and_args = (*call.keys, *call.args)
        try:
            try:
                reply = await self.redis.evalsha(call.script.sha, len(call.keys), *keys_and_args)
            except NoScriptError:
                reply = await self.redis.eval(call.script.source, len(call.keys), *keys_and_args)
        except ResponseError as exc:
            raise replicated.script_failure(exc) from None
        return call.parse(reply)

    async def _run_replicated(self, call: Call[T], replicas: int, timeout: float) -> T:
        """Runs ``call``, then waits until ``replicas`` replicas have it (WAIT)."""
        replicated.check(replicas, timeout)
        if not replicas:
            return await self._run(call)
        if isinstance(self.redis, AsyncRedisCluster):
            await self.redis.initialize()  # the pipeline needs the slot's node
        pipe = replicated.pipeline(self.redis, call, replicas, timeout, source=False)
        results = await pipe.execute(raise_on_error=False)
        if replicated.needs_source(results):
            pipe = replicated.pipeline(self.redis, call, replicas, timeout, source=True)
            results = await pipe.execute(raise_on_error=False)
        return replicated.replicated_reply(call, results, replicas)

    async def push(self, task: Task, *, replicas: int = 0, replica_timeout: float = 1.0) -> str:
        """Enqueues one task; returns its id. With ``replicas``, see :meth:`push_many`."""
        return await self._run_replicated(self.ops.push_one(task), replicas, replica_timeout)

    async def push_many(
        self, tasks: Sequence[Task], *, replicas: int = 0, replica_timeout: float = 1.0
    ) -> list[str]:
        """Enqueues tasks atomically (all or none); returns their ids in order.

        With ``replicas`` > 0 it also waits up to ``replica_timeout`` seconds until that
        many replicas have the push (``WAIT``), so a failover cannot lose it; if fewer
        confirm in time it raises :class:`NotReplicated` (the push was made).
        """
        return await self._run_replicated(self.ops.push(tasks), replicas, replica_timeout)

    async def pop(
        self,
        count: int = 1,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        worker_id: str | None = None,
        lease_seconds: float | None = None,
    ) -> list[LeasedTask]:
        """Leases up to ``count`` ready tasks, fairly across tenants; [] when none is ready."""
        call = self.ops.pop(count, assigned_users, steal_targets, worker_id, lease_seconds)
        return await self._run(call)

    async def finish(self, task: LeasedTask, result: Any = None) -> None:
        """Marks a leased task FINISHED; raises :class:`LeaseLost` if the lease was lost."""
        await self._run(self.ops.finish_one(task, result))

    async def finish_many(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None
    ) -> list[str]:
        """Finishes many tasks in one call; returns the ids whose lease was lost."""
        return await self._run(self.ops.finish(tasks, results or [None] * len(tasks)))

    async def release(self, tasks: Sequence[LeasedTask]) -> list[str]:
        """Hands leased tasks back now, attempts unchanged; returns ids whose lease was lost."""
        return await self._run(self.ops.release(tasks))

    async def fail(self, task: LeasedTask, error: str = "", *, retry: bool = True) -> TaskState:
        """Fails an attempt; returns SCHEDULED (retry after backoff) or FAILED."""
        return await self._run(self.ops.fail(task, error, retry))

    async def extend(self, task: LeasedTask, seconds: float) -> float:
        """Extends the lease to now + ``seconds``; returns (and records) the new deadline."""
        return await self._run(self.ops.extend(task, seconds))

    async def cancel(self, task_id: str) -> bool:
        """Cancels a task that has not started; False if it is running or has ended."""
        return await self._run(self.ops.cancel(task_id))

    async def retry(self, task_id: str) -> bool:
        """Queues a FAILED task again now; False if it had not failed."""
        return await self._run(self.ops.retry(task_id))

    async def xcom_push(self, task_id: str, key: str, value: Any, ttl: float | None = None) -> None:
        """Stores ``value`` (MessagePack) under ``key`` for the dependents of ``task_id``."""
        await self._run(self.ops.xcom_push(task_id, key, value, ttl))

    async def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Any:
        """What ``task_id`` stored under ``key``; ``default`` if nothing (or it expired)."""
        return await self._run(self.ops.xcom_pull(task_id, key, default))

    async def tasks(
        self,
        state: TaskState | str,
        user_id: str | None = None,
        name: str | None = None,
        cursor: int = 0,
        limit: int = 50,
    ) -> TaskPage:
        """A page of the tasks in ``state`` (of ``user_id`` / ``name``); see ``Ops.tasks``."""
        return await self._run(self.ops.tasks(state, user_id, name, cursor, limit))

    async def retry_failed(self, user_id: str) -> int:
        """Queues every FAILED task of ``user_id`` again, a slice per call; returns how many."""
        retried, cursor = 0, 0
        while True:
            cursor, count = await self._run(self.ops.retry_failed(user_id, cursor))
            retried += count
            if not cursor:
                return retried

    async def get(self, task_id: str) -> TaskInfo | None:
        """Everything stored about a task, or None if there is no such task."""
        return await self._run(self.ops.get(task_id))

    async def stats(self) -> QueueStats:
        """Tasks per state, lifetime counters and per-tenant figures."""
        return await self._run(self.ops.stats())

    async def reap(self, limit: int = 1000) -> Maintenance:
        """Maintenance: expired leases, due scheduled tasks, expired registry entries."""
        return await self._run(self.ops.reap(limit))

    async def next_due(self) -> float | None:
        """Seconds until a scheduled task is due or a lease expires (0: now); None: neither."""
        return await self._run(self.ops.next_due())

    async def promote(self, limit: int = 1000) -> int:
        """Makes up to ``limit`` scheduled tasks whose time has come ready."""
        return await self._run(self.ops.promote(limit))

    async def close(self) -> None:
        """Closes the connection pool."""
        await self.redis.aclose()

    async def __aenter__(self: Q) -> Q:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
