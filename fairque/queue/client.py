"""The fair queue's clients: :class:`FairQueue` (blocking) and :class:`AsyncFairQueue`.

Both are facades with no logic: each method builds a call with :class:`QueueOps` and
sends it through an executor, which other clients of the same server may share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from fairque.config import QueueSettings
from fairque.engine import settings as settings_store
from fairque.engine.calls import Call
from fairque.engine.connect import AsyncClient, SyncClient
from fairque.engine.executor import AsyncClosing, AsyncExecutor, Closing, Executor
from fairque.engine.keys import Namespace
from fairque.engine.notify import RECHECK_SECONDS, AsyncListener, Listener
from fairque.engine.records import Record, TaskState
from fairque.queue.batching import PushBatcher
from fairque.queue.models import (
    FairnessView,
    LeasedTask,
    Maintenance,
    QueueStats,
    SharesChange,
    SharesPage,
    Task,
    TaskInfo,
    TaskPage,
    TenantShares,
    TenantStats,
    TenantStatsPage,
    WorkerInfo,
)
from fairque.queue.ops import STATS_FAIRNESS_TOP, QueueOps, ResultWait

T = TypeVar("T")
MAINTENANCE_INTERVAL = 2.0  # seconds between a namespace's maintenance rounds
MAINTENANCE_ROUNDS = 100  # rounds in a row, at most, while each hits its bound
HAND_OVER_DELAY = 1.0  # seconds before a task handed over is offered again
UNSERVED_GRACE = 60.0  # seconds a task may wait for a live worker that serves its function


class FairQueue(Closing):
    """A fair multi-tenant queue in one namespace of a Redis / Valkey server.

    >>> q = FairQueue()  # embedded Valkey, or $FAIRQUE_REDIS_URL  # doctest: +SKIP
    >>> q.push(Task(user_id="alice", payload={"n": 1}))  # doctest: +SKIP

    ``executor`` shares a connection pool with other clients (then :meth:`close` leaves
    it open); ``client`` sends through a redis-py client of your own.
    """

    def __init__(
        self,
        url: str | None = None,
        namespace: str = "default",
        *,
        settings: QueueSettings | None = None,
        client: SyncClient | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.ops = QueueOps(Namespace(namespace))
        self.owns_executor = executor is None
        if executor is None:
            executor = Executor(client) if client is not None else Executor.connect(url)
        self.executor = executor
        settings_store.write_on_first_use(self.executor, self.ops.namespace, settings)

    @property
    def namespace(self) -> Namespace:
        """The namespace's keys and settings."""
        return self.ops.namespace

    @property
    def redis(self) -> SyncClient:
        """The redis-py client the calls go through."""
        return self.executor.client

    @property
    def wake_channels(self) -> list[str]:
        """The sharded pub/sub channels published when tasks become ready."""
        return [self.namespace.wake_channel]

    def execute(self, call: Call[T]) -> T:
        """Sends a call built by an entry point's ops; its parsed reply."""
        return self.executor.execute(call)

    def push(self, task: Task, *, replicas: int = 0, replica_timeout: float = 1.0) -> str:
        """Enqueues one task; returns its id. With ``replicas``, see :meth:`push_many`."""
        return self.executor.execute_replicated(self.ops.push_one(task), replicas, replica_timeout)

    def push_many(
        self, tasks: Sequence[Task], *, replicas: int = 0, replica_timeout: float = 1.0
    ) -> list[str]:
        """Enqueues tasks atomically (all or none); returns their ids in order.

        With ``replicas`` > 0 it also waits up to ``replica_timeout`` seconds until that
        many replicas have the push (``WAIT``), so a failover cannot lose it; if fewer
        confirm in time it raises :class:`NotReplicated` (the push was made).
        """
        return self.executor.execute_replicated(self.ops.push(tasks), replicas, replica_timeout)

    def pop(
        self,
        count: int = 1,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        worker_id: str | None = None,
        lease_seconds: float | None = None,
        *,
        wait: float | None = None,
    ) -> list[LeasedTask]:
        """Leases up to ``count`` ready tasks, fairly across tenants; [] when none is ready.

        With ``wait`` (seconds), it first waits until a tenant may be served, at most that
        long, then pops: at once if one may be served already. On one server the pop is
        queued behind the wait, so it runs the moment work arrives. It may still return []
        before ``wait`` has passed, when another worker took the work first; and
        :meth:`stop_waiting` ends the wait early.

        A task whose stored record cannot be read is failed (its error names the field)
        instead of being returned; the others are."""
        call = self.ops.pop(
            count, assigned_users, steal_targets, worker_id, lease_seconds, wait=wait
        )
        leased = self.executor.execute(call)
        for unreadable in leased.unreadable:
            self.executor.execute(self.ops.fail_unreadable(unreadable))
        return leased

    def stop_waiting(self) -> None:
        """Ends the waits of the pops of this client's connection pool now (from another
        thread): each pops at once (see :meth:`pop`'s ``wait``)."""
        self.executor.stop_waits()

    def finish(self, task: LeasedTask, result: Any = None) -> None:
        """Marks a leased task FINISHED; raises :class:`LeaseLost` if the lease was lost."""
        self.executor.execute(self.ops.finish_one(task, result))

    def finish_many(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None
    ) -> list[str]:
        """Finishes many tasks in one call; returns the ids whose lease was lost."""
        return self.executor.execute(self.ops.finish(tasks, results))

    def release(self, tasks: Sequence[LeasedTask]) -> list[str]:
        """Hands leased tasks back now, attempts unchanged; returns ids whose lease was lost."""
        return self.executor.execute(self.ops.release(tasks))

    def fail(self, task: LeasedTask, error: str = "", *, retry: bool = True) -> TaskState:
        """Fails an attempt; returns SCHEDULED (retry after backoff) or FAILED."""
        return self.executor.execute(self.ops.fail(task, error, retry))

    def extend(self, task: LeasedTask, seconds: float) -> float:
        """Extends the lease to now + ``seconds``; returns (and records) the new deadline."""
        return self.executor.execute(self.ops.extend(task, seconds))

    def cancel(self, task_id: str) -> bool:
        """Cancels a task that has not started; False if it is running or has ended."""
        return self.executor.execute(self.ops.cancel(task_id))

    def retry(self, task_id: str) -> bool:
        """Queues a FAILED task again now; False if it had not failed."""
        return self.executor.execute(self.ops.retry(task_id))

    def xcom_push(self, task_id: str, key: str, value: Any, ttl: float | None = None) -> None:
        """Stores ``value`` (MessagePack) under ``key`` for the dependents of ``task_id``."""
        self.executor.execute(self.ops.xcom_push(task_id, key, value, ttl))

    def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Any:
        """What ``task_id`` stored under ``key``; ``default`` if nothing (or it expired)."""
        return self.executor.execute(self.ops.xcom_pull(task_id, key, default))

    def tasks(
        self,
        state: TaskState | str,
        user_id: str | None = None,
        name: str | None = None,
        cursor: int = 0,
        limit: int = 50,
    ) -> TaskPage:
        """A page of the tasks in ``state`` (of ``user_id`` / ``name``); see ``QueueOps.tasks``."""
        return self.executor.execute(self.ops.tasks(state, user_id, name, cursor, limit))

    def retry_failed(self, user_id: str) -> int:
        """Queues every FAILED task of ``user_id`` again, a slice per call; returns how many."""
        retried, cursor = 0, 0
        while True:
            cursor, count = self.executor.execute(self.ops.retry_failed(user_id, cursor))
            retried += count
            if not cursor:
                return retried

    def get(self, task_id: str) -> TaskInfo | None:
        """Everything stored about a task, or None if there is no such task."""
        return self.executor.execute(self.ops.get(task_id))

    def get_record(self, record_id: str) -> Record | None:
        """The stored record of any kind (task, job, storage task), or None."""
        return self.executor.execute(self.ops.get_record(record_id))

    def result(self, task_id: str, timeout: float | None = None) -> Any:
        """Waits until task ``task_id`` ends and returns its result (what the worker's
        function returned; the task must have been pushed with ``keep_result=True``).

        Waits without polling: the script that ends a task publishes its id on the
        namespace's ``ended`` channel. ``timeout`` (seconds; None: no limit) raises
        :class:`~fairque.errors.ResultTimeout`; a task that failed for good or was
        canceled raises :class:`~fairque.errors.TaskFailed` with its last error; one
        pushed without ``keep_result`` raises :class:`~fairque.errors.ResultNotKept`.
        """
        wait = ResultWait(task_id, timeout, RECHECK_SECONDS)
        settled = wait.settle(self.get(task_id))  # an ended task needs no subscription
        if settled is not None:
            return settled.result
        with Listener(self.executor.client, self.namespace.ended_channel) as listener:
            while True:
                settled = wait.settle(self.get(task_id))  # read after subscribing: no race
                if settled is not None:
                    return settled.result
                listener.wait_for(task_id, wait.next_wait())

    def stats(self, fairness_top: int = STATS_FAIRNESS_TOP) -> QueueStats:
        """Tasks per state, lifetime counters and the busiest tenants' figures, with the
        fairness figures of the ``fairness_top`` busiest (0 to 100; 0 skips the part that
        costs most, for an overview that polls)."""
        return self.executor.execute(self.ops.stats(fairness_top))

    def busiest_tenants(self, cursor: int = 0, count: int = 50) -> TenantStatsPage:
        """A page of the tenants with ready tasks, the busiest first (0: no more)."""
        return self.executor.execute(self.ops.busiest_tenants(cursor, count))

    def tenant_stats(self, tenant: str) -> TenantStats:
        """One tenant's ready tasks and lifetime counters."""
        return self.executor.execute(self.ops.tenant_stats(tenant))

    def reap(self, limit: int = 1000) -> Maintenance:
        """Maintenance: expired leases, due scheduled tasks, expired registry entries."""
        return self.executor.execute(self.ops.reap(limit))

    def maintain(self, interval: float = MAINTENANCE_INTERVAL) -> Maintenance:
        """A maintenance round if the namespace's last one (by any process) is ``interval``
        seconds old. Workers, the master and the scheduler call this every few seconds, so a
        namespace tidies itself; ``ran`` is False when no round was due."""
        return self.executor.execute(self.ops.maintain(None, interval))

    def next_due(self) -> float | None:
        """Seconds until a scheduled task is due or a lease expires (0: now); None: neither."""
        return self.executor.execute(self.ops.next_due())

    def promote(self, limit: int = 1000) -> int:
        """Makes up to ``limit`` scheduled tasks whose time has come ready."""
        return self.executor.execute(self.ops.promote(limit))

    def namespace_settings(self) -> QueueSettings:
        """The settings the namespace's scripts apply, as the server holds them."""
        return self.executor.execute(settings_store.read(self.namespace))

    def register_worker(self, worker: WorkerInfo, ttl: float) -> None:
        """Registers a live worker (or renews it) for ``ttl`` seconds (workers do this)."""
        self.executor.execute(self.ops.register_worker(worker, ttl))

    def unregister_worker(self, worker_id: str) -> None:
        """Takes a stopping worker out of the registry."""
        self.executor.execute(self.ops.unregister_worker(worker_id))

    def workers(self) -> list[WorkerInfo]:
        """The live workers: what they serve, their concurrency, tasks in flight."""
        return self.executor.execute(self.ops.workers())

    def tenant(self, tenant: str) -> TenantShares:
        """A tenant's shares (weight, limits, paused) and where it stands now."""
        return self.executor.execute(self.ops.tenant(tenant))

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
        """Changes a tenant's shares at once (None keeps a value; see
        :class:`~fairque.queue.models.SharesChange`) and returns them."""
        change = SharesChange(
            weight=weight, concurrency=concurrency, rate=rate, period=period, paused=paused
        )
        return self.executor.execute(self.ops.set_tenant(tenant, change))

    def tenants_with_shares(self, cursor: int = 0, count: int = 100) -> SharesPage:
        """A page of the tenants whose shares are not all defaults (cursor 0: no more)."""
        return self.executor.execute(self.ops.tenants_with_shares(cursor, count))

    def fairness(self, minutes: int = 5, top: int = 20) -> FairnessView:
        """Who the queue served over the last ``minutes`` (1 to 10): starts and waits
        from ready to start, overall and for the ``top`` busiest tenants, with their
        shares. Its cost is bounded by minutes x top, whatever the number of tenants."""
        return self.executor.execute(self.ops.fairness(minutes, top))

    def hand_over(
        self,
        tasks: Sequence[LeasedTask],
        delay: float = HAND_OVER_DELAY,
        grace: float = UNSERVED_GRACE,
    ) -> list[str]:
        """Gives back leased tasks whose function this worker lacks (no attempt counted);
        one that no live worker serves for ``grace`` s fails. Returns ids whose lease was lost."""
        return self.executor.execute(self.ops.hand_over(tasks, delay, grace))


class AsyncFairQueue(AsyncClosing):
    """:class:`FairQueue` for asyncio: every method is a coroutine.

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
        executor: AsyncExecutor | None = None,
    ) -> None:
        self.ops = QueueOps(Namespace(namespace))
        self.owns_executor = executor is None
        if executor is None:
            executor = AsyncExecutor(client) if client is not None else AsyncExecutor.connect(url)
        self.executor = executor
        self.pushes = PushBatcher(self.ops, executor)
        settings_store.write_on_first_use(self.executor, self.ops.namespace, settings)

    @property
    def namespace(self) -> Namespace:
        """The namespace's keys and settings."""
        return self.ops.namespace

    async def close(self) -> None:
        """Waits until the pushes made so far are answered, then closes the connection
        pool, unless it is shared with another client."""
        await self.pushes.drain()
        await super().close()

    @property
    def redis(self) -> AsyncClient:
        """The redis-py client the calls go through."""
        return self.executor.client

    @property
    def wake_channels(self) -> list[str]:
        """The sharded pub/sub channels published when tasks become ready."""
        return [self.namespace.wake_channel]

    async def execute(self, call: Call[T]) -> T:
        """Sends a call built by an entry point's ops; its parsed reply."""
        return await self.executor.execute(call)

    async def push(self, task: Task, *, replicas: int = 0, replica_timeout: float = 1.0) -> str:
        """Enqueues one task; returns its id. With ``replicas``, see :meth:`push_many`.

        Pushes made concurrently in this event loop go to the server together, in one
        call (see :mod:`fairque.queue.batching`); each caller gets its own id, or its
        own error. Pushes awaited one after another keep their order."""
        return await self.pushes.push(task, replicas, replica_timeout)

    async def push_many(
        self, tasks: Sequence[Task], *, replicas: int = 0, replica_timeout: float = 1.0
    ) -> list[str]:
        """Enqueues tasks atomically (all or none); returns their ids in order (see
        :meth:`FairQueue.push_many` for ``replicas``)."""
        call = self.ops.push(tasks)
        return await self.executor.execute_replicated(call, replicas, replica_timeout)

    async def pop(
        self,
        count: int = 1,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        worker_id: str | None = None,
        lease_seconds: float | None = None,
        *,
        wait: float | None = None,
    ) -> list[LeasedTask]:
        """Leases up to ``count`` ready tasks, fairly across tenants; [] when none is ready
        (see :meth:`FairQueue.pop`, and for ``wait``)."""
        call = self.ops.pop(
            count, assigned_users, steal_targets, worker_id, lease_seconds, wait=wait
        )
        leased = await self.executor.execute(call)
        for unreadable in leased.unreadable:
            await self.executor.execute(self.ops.fail_unreadable(unreadable))
        return leased

    async def stop_waiting(self) -> None:
        """Ends the waits of the pops of this client's connection pool now: each pops at
        once (see :meth:`FairQueue.pop`'s ``wait``)."""
        await self.executor.stop_waits()

    async def finish(self, task: LeasedTask, result: Any = None) -> None:
        """Marks a leased task FINISHED; raises :class:`LeaseLost` if the lease was lost."""
        await self.executor.execute(self.ops.finish_one(task, result))

    async def finish_many(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None
    ) -> list[str]:
        """Finishes many tasks in one call; returns the ids whose lease was lost."""
        return await self.executor.execute(self.ops.finish(tasks, results))

    async def release(self, tasks: Sequence[LeasedTask]) -> list[str]:
        """Hands leased tasks back now, attempts unchanged; returns ids whose lease was lost."""
        return await self.executor.execute(self.ops.release(tasks))

    async def fail(self, task: LeasedTask, error: str = "", *, retry: bool = True) -> TaskState:
        """Fails an attempt; returns SCHEDULED (retry after backoff) or FAILED."""
        return await self.executor.execute(self.ops.fail(task, error, retry))

    async def extend(self, task: LeasedTask, seconds: float) -> float:
        """Extends the lease to now + ``seconds``; returns (and records) the new deadline."""
        return await self.executor.execute(self.ops.extend(task, seconds))

    async def cancel(self, task_id: str) -> bool:
        """Cancels a task that has not started; False if it is running or has ended."""
        return await self.executor.execute(self.ops.cancel(task_id))

    async def retry(self, task_id: str) -> bool:
        """Queues a FAILED task again now; False if it had not failed."""
        return await self.executor.execute(self.ops.retry(task_id))

    async def xcom_push(self, task_id: str, key: str, value: Any, ttl: float | None = None) -> None:
        """Stores ``value`` (MessagePack) under ``key`` for the dependents of ``task_id``."""
        await self.executor.execute(self.ops.xcom_push(task_id, key, value, ttl))

    async def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Any:
        """What ``task_id`` stored under ``key``; ``default`` if nothing (or it expired)."""
        return await self.executor.execute(self.ops.xcom_pull(task_id, key, default))

    async def tasks(
        self,
        state: TaskState | str,
        user_id: str | None = None,
        name: str | None = None,
        cursor: int = 0,
        limit: int = 50,
    ) -> TaskPage:
        """A page of the tasks in ``state`` (of ``user_id`` / ``name``); see ``QueueOps.tasks``."""
        return await self.executor.execute(self.ops.tasks(state, user_id, name, cursor, limit))

    async def retry_failed(self, user_id: str) -> int:
        """Queues every FAILED task of ``user_id`` again, a slice per call; returns how many."""
        retried, cursor = 0, 0
        while True:
            cursor, count = await self.executor.execute(self.ops.retry_failed(user_id, cursor))
            retried += count
            if not cursor:
                return retried

    async def get(self, task_id: str) -> TaskInfo | None:
        """Everything stored about a task, or None if there is no such task."""
        return await self.executor.execute(self.ops.get(task_id))

    async def get_record(self, record_id: str) -> Record | None:
        """The stored record of any kind (task, job, storage task), or None."""
        return await self.executor.execute(self.ops.get_record(record_id))

    async def result(self, task_id: str, timeout: float | None = None) -> Any:
        """Waits until task ``task_id`` ends and returns its result; see
        :meth:`FairQueue.result`."""
        wait = ResultWait(task_id, timeout, RECHECK_SECONDS)
        settled = wait.settle(await self.get(task_id))
        if settled is not None:
            return settled.result
        async with AsyncListener(self.executor.client, self.namespace.ended_channel) as listener:
            while True:
                settled = wait.settle(await self.get(task_id))
                if settled is not None:
                    return settled.result
                await listener.wait_for(task_id, wait.next_wait())

    async def stats(self, fairness_top: int = STATS_FAIRNESS_TOP) -> QueueStats:
        """Tasks per state, lifetime counters and the busiest tenants' figures (see
        :meth:`FairQueue.stats` for ``fairness_top``)."""
        return await self.executor.execute(self.ops.stats(fairness_top))

    async def busiest_tenants(self, cursor: int = 0, count: int = 50) -> TenantStatsPage:
        """A page of the tenants with ready tasks, the busiest first (0: no more)."""
        return await self.executor.execute(self.ops.busiest_tenants(cursor, count))

    async def tenant_stats(self, tenant: str) -> TenantStats:
        """One tenant's ready tasks and lifetime counters."""
        return await self.executor.execute(self.ops.tenant_stats(tenant))

    async def reap(self, limit: int = 1000) -> Maintenance:
        """Maintenance: expired leases, due scheduled tasks, expired registry entries."""
        return await self.executor.execute(self.ops.reap(limit))

    async def maintain(self, interval: float = MAINTENANCE_INTERVAL) -> Maintenance:
        """A maintenance round if one is due (see :meth:`FairQueue.maintain`)."""
        return await self.executor.execute(self.ops.maintain(None, interval))

    async def next_due(self) -> float | None:
        """Seconds until a scheduled task is due or a lease expires (0: now); None: neither."""
        return await self.executor.execute(self.ops.next_due())

    async def promote(self, limit: int = 1000) -> int:
        """Makes up to ``limit`` scheduled tasks whose time has come ready."""
        return await self.executor.execute(self.ops.promote(limit))

    async def namespace_settings(self) -> QueueSettings:
        """The settings the namespace's scripts apply, as the server holds them."""
        return await self.executor.execute(settings_store.read(self.namespace))

    async def register_worker(self, worker: WorkerInfo, ttl: float) -> None:
        """Registers a live worker (or renews it) for ``ttl`` seconds (workers do this)."""
        await self.executor.execute(self.ops.register_worker(worker, ttl))

    async def unregister_worker(self, worker_id: str) -> None:
        """Takes a stopping worker out of the registry."""
        await self.executor.execute(self.ops.unregister_worker(worker_id))

    async def workers(self) -> list[WorkerInfo]:
        """The live workers: what they serve, their concurrency, tasks in flight."""
        return await self.executor.execute(self.ops.workers())

    async def tenant(self, tenant: str) -> TenantShares:
        """A tenant's shares (weight, limits, paused) and where it stands now."""
        return await self.executor.execute(self.ops.tenant(tenant))

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
        """Changes a tenant's shares at once (None keeps a value; see
        :class:`~fairque.queue.models.SharesChange`) and returns them."""
        change = SharesChange(
            weight=weight, concurrency=concurrency, rate=rate, period=period, paused=paused
        )
        return await self.executor.execute(self.ops.set_tenant(tenant, change))

    async def tenants_with_shares(self, cursor: int = 0, count: int = 100) -> SharesPage:
        """A page of the tenants whose shares are not all defaults (cursor 0: no more)."""
        return await self.executor.execute(self.ops.tenants_with_shares(cursor, count))

    async def fairness(self, minutes: int = 5, top: int = 20) -> FairnessView:
        """Who the queue served over the last ``minutes`` (1 to 10): starts and waits
        from ready to start, overall and for the ``top`` busiest tenants, with their
        shares. Its cost is bounded by minutes x top, whatever the number of tenants."""
        return await self.executor.execute(self.ops.fairness(minutes, top))

    async def hand_over(
        self,
        tasks: Sequence[LeasedTask],
        delay: float = HAND_OVER_DELAY,
        grace: float = UNSERVED_GRACE,
    ) -> list[str]:
        """Gives back leased tasks whose function this worker lacks (see
        :meth:`FairQueue.hand_over`)."""
        return await self.executor.execute(self.ops.hand_over(tasks, delay, grace))
