# Generated from fairque/queue/async_client.py by tools/unasync.py: edit that file instead.
"""The fair queue's clients: :class:`FairQueue` (one namespace) and
:class:`ShardedQueue` (the shards of one logical queue), each a kind of :class:`Queue`.

They are facades with no logic: each method runs its operation's plan
(:mod:`fairque.queue.plans`) through an executor, which other clients of the same
server may share. The asyncio clients are written by hand in
:mod:`fairque.queue.async_client`; the blocking ones, in :mod:`fairque.queue.client`, are
generated from them (``tools/unasync.py``, as httpcore generates its blocking code; a
test checks that the generated file is current).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from fairque.config import QueueSettings
from fairque.engine import records
from fairque.engine import settings as settings_store
from fairque.engine.calls import Call
from fairque.engine.connect import SyncClient
from fairque.engine.executor import Closing, Executor
from fairque.engine.keys import Namespace
from fairque.engine.notify import RECHECK_SECONDS, Listener
from fairque.engine.records import ErrorReport, Record, TaskState
from fairque.engine.shards import shard_namespaces
from fairque.queue.batching import Pushes
from fairque.queue.calls import figures, leases, maintenance, push, quotas, workers
from fairque.queue.calls import tasks as task_calls
from fairque.queue.calls.bulk import BULK_BATCH
from fairque.queue.calls.figures import STATS_FAIRNESS_TOP
from fairque.queue.calls.leases import HAND_OVER_DELAY, UNSERVED_GRACE
from fairque.queue.calls.maintenance import MAINTENANCE_INTERVAL
from fairque.queue.calls.tasks import ResultWait
from fairque.queue.hooks import ClientHooks
from fairque.queue.models import (
    Backlog,
    BulkAction,
    BulkBatch,
    FairnessView,
    LeasedTask,
    LimitsPage,
    Maintenance,
    QueueStats,
    Selector,
    SharesPage,
    Task,
    TaskInfo,
    TaskLimits,
    TaskPage,
    TenantShares,
    TenantStats,
    TenantStatsPage,
    WorkerInfo,
    WorkerUpkeep,
)
from fairque.queue.plans import (
    QueuePlans,
    merge_backlogs,
    merge_fairness,
    merge_limits,
    merge_maintenance,
    merge_stats,
    merge_upkeep,
    merge_workers,
    nothing,
    soonest,
)
from fairque.queue.shares import LimitsChange, SharesChange

T = TypeVar("T")


class Queue(Closing):
    """A fair queue: one namespace (:class:`FairQueue`) or the shards of one
    (:class:`ShardedQueue`). The worker, the metrics and the Web UI take either.

    ``executor`` shares a connection pool with other clients (then :meth:`close` leaves
    it open); ``client`` sends through a redis-py client of your own; ``hooks`` see each
    task before it is pushed (:class:`~fairque.queue.hooks.ClientHooks`).
    """

    def __init__(
        self,
        url: str | None,
        namespaces: Sequence[str],
        settings: QueueSettings | None,
        client: SyncClient | None,
        executor: Executor | None,
        *,
        hooks: ClientHooks | None,
    ) -> None:
        self.plans = QueuePlans(namespaces)
        self.hooks = hooks or ClientHooks()
        self.owns_executor = executor is None
        if executor is None:
            executor = Executor(client) if client is not None else Executor.connect(url)
        self.executor = executor
        self.pushes = [Pushes(namespace, executor) for namespace in self.plans.shards]
        for namespace in self.plans.shards:
            settings_store.write_on_first_use(executor, namespace, settings)

    @property
    def redis(self) -> SyncClient:
        """The redis-py client the calls go through."""
        return self.executor.client

    @property
    def wake_channels(self) -> list[str]:
        """The sharded pub/sub channels published when tasks become ready (a worker
        subscribes to all)."""
        return [namespace.wake_channel for namespace in self.plans.shards]

    @property
    def abort_channels(self) -> list[str]:
        """The sharded pub/sub channels ``cancel`` publishes the ids of running tasks it
        canceled on (a worker subscribes to all, and stops those it runs)."""
        return [namespace.abort_channel for namespace in self.plans.shards]

    def close(self) -> None:
        """Waits until the pushes made so far are answered, then closes the connection
        pool, unless it is shared with another client."""
        for pushes in self.pushes:
            pushes.drain()
        super().close()

    def push(self, task: Task, *, replicas: int = 0, replica_timeout: float = 1.0) -> str:
        """Enqueues one task (on its tenant's shard); returns its id. With ``replicas``,
        see :meth:`push_many`.

        The asyncio client sends pushes made concurrently in one event loop together, in
        one call (see :mod:`fairque.queue.batching`); each caller gets its own id, or its
        own error. Pushes awaited one after another keep their order."""
        task = self.hooks.before_push(task)
        pushes = self.pushes[self.plans.shard_of(task.user_id)]
        return pushes.push(task, replicas, replica_timeout)

    def push_many(
        self, tasks: Sequence[Task], *, replicas: int = 0, replica_timeout: float = 1.0
    ) -> list[str]:
        """Enqueues tasks atomically (all or none; sharded: per shard); returns their ids
        in order.

        With ``replicas`` > 0 it also waits up to ``replica_timeout`` seconds until that
        many replicas have the push (``WAIT``), so a failover cannot lose it; if fewer
        confirm in time it raises :class:`NotReplicated` (the push was made).
        """
        tasks = [self.hooks.before_push(task) for task in tasks]
        plan = self.plans.scattered(
            push.tenant_of, tasks, push.push, replicas=replicas, replica_timeout=replica_timeout
        )
        return self.executor.run(plan)

    def pop(
        self,
        count: int = 1,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        worker_id: str | None = None,
        lease_seconds: float | None = None,
        *,
        wait: float | None = None,
        names: Sequence[str] | None = None,
    ) -> list[LeasedTask]:
        """Leases up to ``count`` ready tasks, fairly across tenants; [] when none is ready.

        With ``names``, only tasks of those names, and then tasks of names no live worker
        serves (those a worker hands over, see :meth:`hand_over`): a worker passes the
        names of its functions, so it never leases another deployment's tasks. Without,
        tasks of any name.

        With ``wait`` (seconds; one namespace only), it first waits until a tenant may be
        served, at most that long, then pops: at once if one may be served already. On
        one server the pop is queued behind the wait, so it runs the moment work arrives.
        Work that comes due without a push (a delayed task, a retry backoff, a tenant's
        rate window opening) ends the wait too. It may still return [] before ``wait``
        has passed, when another worker took a pushed task first; and
        :meth:`stop_waiting` ends the wait early.

        A task whose stored record cannot be read is failed (its error names the field)
        instead of being returned; the others are."""
        plan = self.plans.pop(
            count, assigned_users, steal_targets, worker_id, lease_seconds, wait=wait, names=names
        )
        return self.executor.run(plan)

    def stop_waiting(self) -> None:
        """Ends the waits of the pops of this client's connection pool now (from another
        thread or task): each pops at once (see :meth:`pop`'s ``wait``)."""
        self.executor.stop_waits()

    def finish(self, task: LeasedTask, result: Any = None) -> None:
        """Marks a leased task FINISHED; raises :class:`LeaseLost` if the lease was lost."""
        self.executor.execute(self.plans.by_tenant(task.user_id, leases.finish_one, task, result))

    def finish_many(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None
    ) -> list[str]:
        """Finishes many tasks in one call (per shard); returns the ids whose lease was
        lost."""
        return self.executor.run(self.plans.finish(tasks, results))

    def release(self, tasks: Sequence[LeasedTask]) -> list[str]:
        """Hands leased tasks back now, attempts unchanged; returns ids whose lease was lost."""
        return self.executor.run(self.plans.by_tasks(tasks, leases.release))

    def fail(
        self, task: LeasedTask, error: str | BaseException | ErrorReport = "", *, retry: bool = True
    ) -> TaskState:
        """Fails an attempt with ``error``: a text, or the exception that ended it (its
        type and traceback are kept too, see :class:`~fairque.queue.models.TaskInfo`'s
        ``errors``); returns SCHEDULED (retry after backoff) or FAILED."""
        return self.executor.execute(
            self.plans.by_tenant(task.user_id, leases.fail, task, error, retry)
        )

    def extend(self, task: LeasedTask, seconds: float) -> float:
        """Extends the lease to now + ``seconds``; returns (and records) the new deadline."""
        return self.executor.execute(
            self.plans.by_tenant(task.user_id, leases.extend, task, seconds)
        )

    def report(
        self,
        task: LeasedTask,
        progress: float | None = None,
        message: str = "",
        lines: Sequence[str] = (),
    ) -> int:
        """Records a running task's progress and log lines in its record (``get`` shows
        them); returns how many log lines it holds. Task functions call it through
        their context (``context.progress``, ``context.log``)."""
        return self.executor.execute(
            self.plans.by_tenant(task.user_id, leases.report, task, progress, message, lines)
        )

    def cancel(self, task_id: str) -> bool:
        """Cancels a task that has not ended, and its dependents; False if it had ended.

        A task that waits never starts. One that runs ends CANCELED at once (its tenant's
        slot is free again) and the worker running it stops the run: an async function
        gets ``CancelledError``, a task process is killed, a sync function on a thread
        sees ``context.cancelled`` become true (a thread cannot be stopped from outside)."""
        return self.executor.run(self.plans.on_holder(task_id, records.cancel, task_id, abort=True))

    def retry(self, task_id: str) -> bool:
        """Queues a FAILED task again now; False if it had not failed."""
        return self.executor.run(self.plans.on_holder(task_id, records.retry, task_id))

    def xcom_push(self, task_id: str, key: str, value: Any, ttl: float | None = None) -> None:
        """Stores ``value`` (MessagePack) under ``key`` for the dependents of ``task_id``."""
        self.executor.run(
            self.plans.on_holder(task_id, task_calls.xcom_push, task_id, key, value, ttl)
        )

    def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Any:
        """What ``task_id`` stored under ``key``; ``default`` if nothing (or it expired)."""
        return self.executor.run(
            self.plans.on_holder(task_id, task_calls.xcom_pull, task_id, key, default)
        )

    def tasks(
        self,
        state: TaskState | str,
        user_id: str | None = None,
        name: str | None = None,
        cursor: int = 0,
        limit: int = 50,
    ) -> TaskPage:
        """A page of the tasks in ``state`` (of ``user_id`` / ``name``); see
        :func:`fairque.queue.calls.tasks.tasks`."""
        return self.executor.run(self.plans.tasks(state, user_id, name, cursor, limit))

    def retry_failed(self, user_id: str) -> int:
        """Queues every FAILED task of ``user_id`` again, a batch per call; returns how many."""
        return self.executor.run(self.plans.retry_failed(user_id))

    def bulk(
        self,
        action: BulkAction | str,
        selector: Selector,
        cursor: str = "",
        *,
        dry_run: bool = False,
        batch: int = BULK_BATCH,
    ) -> BulkBatch:
        """One batch of a bulk operation: ``retry`` failed tasks, ``cancel`` waiting ones
        (and their dependents), ``delete`` ended ones, of those ``selector`` selects.

        Each call looks at ``batch`` entries at most (1 to 1,000), so the server is never
        held long; pass the cursor it returns back until it is None. With ``dry_run`` it
        only counts the tasks it would act on. Stopped between batches, an operation can
        be started again: what it did stays done, and the tasks it selects are the rest.

        >>> cursor, retried = "", 0  # doctest: +SKIP
        >>> while cursor is not None:  # doctest: +SKIP
        ...     done = queue.bulk("retry", Selector(user_id="alice"), cursor)
        ...     cursor, retried = done.cursor, retried + done.selected
        """
        return self.executor.run(self.plans.bulk(action, selector, cursor, batch, dry_run=dry_run))

    def get(self, task_id: str) -> TaskInfo | None:
        """Everything stored about a task, or None if there is no such task."""
        return self.executor.run(self.plans.found(task_calls.get, task_id))

    def get_record(self, record_id: str) -> Record | None:
        """The stored record of any kind (task, job, storage task), or None."""
        return self.executor.run(self.plans.found(records.get, record_id))

    def result(
        self,
        task_id: str,
        timeout: float | None = None,
        on_progress: Callable[[TaskInfo], None] | None = None,
    ) -> Any:
        """Waits until task ``task_id`` ends and returns its result (what the worker's
        function returned; the task must have been pushed with ``keep_result=True``).

        Waits without polling: the script that ends a task publishes its id on the
        namespace's ``ended`` channel. ``timeout`` (seconds; None: no limit) raises
        :class:`~fairque.errors.ResultTimeout`; a task that failed for good or was
        canceled raises :class:`~fairque.errors.TaskFailed` with its last error; one
        pushed without ``keep_result`` raises :class:`~fairque.errors.ResultNotKept`.
        ``on_progress`` is called with the task's :class:`TaskInfo` each time its
        progress or log lines change while it waits (the task's ``context.progress`` and
        ``context.log`` wake it too).
        """
        wait = ResultWait(task_id, timeout, RECHECK_SECONDS, on_progress)
        namespace = self.executor.run(self.plans.holder(task_id))
        # An ended task needs no subscription.
        settled = wait.settle(self.executor.execute(task_calls.get(namespace, task_id)))
        if settled is not None:
            return settled.result
        with Listener(self.executor, namespace.ended_channel) as listener:
            while True:
                # Read after subscribing: no race with the script that publishes.
                settled = wait.settle(self.executor.execute(task_calls.get(namespace, task_id)))
                if settled is not None:
                    return settled.result
                listener.wait_for(task_id, wait.next_wait())

    def stats(self, fairness_top: int = STATS_FAIRNESS_TOP) -> QueueStats:
        """Tasks per state, lifetime counters and the busiest tenants' figures, with the
        fairness figures of the ``fairness_top`` busiest (0 to 100; 0 skips the part that
        costs most, for an overview that polls)."""
        return self.executor.run(
            self.plans.each(
                functools.partial(merge_stats, fairness_top=fairness_top),
                figures.stats,
                fairness_top,
            )
        )

    def busiest_tenants(self, cursor: int = 0, count: int = 50) -> TenantStatsPage:
        """A page of the tenants with ready tasks, the busiest first (0: no more)."""
        return self.executor.run(
            self.plans.paged(TenantStatsPage, cursor, count, figures.busiest_tenants)
        )

    def tenant_stats(self, tenant: str) -> TenantStats:
        """One tenant's ready tasks and lifetime counters."""
        return self.executor.execute(self.plans.by_tenant(tenant, figures.tenant_stats, tenant))

    def reap(self, limit: int = 1000) -> Maintenance:
        """Maintenance: expired leases, due scheduled tasks, expired registry entries."""
        return self.executor.run(self.plans.each(merge_maintenance, maintenance.reap, limit))

    def maintain(self, interval: float = MAINTENANCE_INTERVAL) -> Maintenance:
        """A maintenance round if the namespace's last one (by any process) is ``interval``
        seconds old. Workers, the master and the scheduler call this every few seconds, so a
        namespace tidies itself; ``ran`` is False when no round was due."""
        return self.executor.run(
            self.plans.each(merge_maintenance, maintenance.maintain, None, interval)
        )

    def next_due(self) -> float | None:
        """Seconds until a scheduled task is due or a lease expires (0: now); None: neither."""
        return self.executor.run(self.plans.each(soonest, maintenance.next_due))

    def backlog(self, tenants: int = 20) -> Backlog:
        """How long ready tasks have waited: the age of the oldest ready task of the
        ``tenants`` busiest tenants and of the ``tenants`` served longest ago (1 to 100);
        ``.oldest`` is the queue's latency. Fair tasks only."""
        return self.executor.run(self.plans.each(merge_backlogs, figures.backlog, tenants))

    def promote(self, limit: int = 1000) -> int:
        """Makes up to ``limit`` scheduled tasks whose time has come ready."""
        return self.executor.run(self.plans.each(sum, maintenance.promote, limit))

    def namespace_settings(self) -> QueueSettings:
        """The settings the namespace's scripts apply, as the server holds them."""
        return self.executor.execute(self.plans.first(settings_store.read))

    def register_worker(self, worker: WorkerInfo, ttl: float) -> None:
        """Registers a live worker (or renews it) for ``ttl`` seconds (workers do this)."""
        self.executor.run(self.plans.each(nothing, workers.register_worker, worker, ttl))

    def upkeep(
        self,
        worker: WorkerInfo,
        ttl: float,
        *,
        longest_wait: float | None,
        rewrite: bool = True,
        names: Sequence[str] | None = None,
        round_interval: float | None = None,
    ) -> WorkerUpkeep:
        """A worker's upkeep in one call per namespace: keeps it registered for ``ttl``
        seconds (its record written unless ``rewrite`` is False and it is registered),
        and tells when work comes due without a push, whether a lane of its task
        ``names`` (None: any) may be served now, and whether a maintenance round is due.
        With ``round_interval`` (seconds between rounds), a round that is due runs in the
        same call, and ``round_due`` says that it hit its bound (:meth:`maintain` goes
        on); without, the caller runs :meth:`maintain` when one is due. A worker that then
        waits until work comes due, ``longest_wait`` seconds at most (None: a busy worker,
        which does not wait), is woken by work added meanwhile that comes due sooner."""
        return self.executor.run(
            self.plans.each(
                merge_upkeep, workers.upkeep, worker, ttl, rewrite=rewrite,
                longest_wait=longest_wait, names=names, round_interval=round_interval,
            )
        )  # fmt: skip

    def unregister_worker(self, worker_id: str) -> None:
        """Takes a stopping worker out of the registry."""
        self.executor.run(self.plans.each(nothing, workers.unregister_worker, worker_id))

    def workers(self) -> list[WorkerInfo]:
        """The live workers: what they serve, their concurrency, tasks in flight."""
        return self.executor.run(self.plans.each(merge_workers, workers.workers))

    def tenant(self, tenant: str) -> TenantShares:
        """A tenant's shares (weight, limits, paused) and where it stands now."""
        return self.executor.execute(self.plans.by_tenant(tenant, quotas.tenant, tenant))

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
        return self.executor.execute(
            self.plans.by_tenant(tenant, quotas.set_tenant, tenant, change)
        )

    def limits(self, name: str) -> TaskLimits:
        """A task name's limits (concurrency, rate, paused) and its tasks running now."""
        return self.executor.run(self.plans.each(merge_limits, quotas.limits, name))

    def set_limits(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        rate: int | None = None,
        period: float | None = None,
        paused: bool | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        priority: int | None = None,
        lease: float | None = None,
    ) -> TaskLimits:
        """Changes a task name's limits and its tasks' defaults at once, across all
        workers (None keeps a value; see :class:`~fairque.queue.shares.LimitsChange`): a
        task of the name starts only when they and its tenant's shares both allow, and a
        task pushed without its own timeout, max_retries or priority takes the name's.
        Returns them."""
        change = LimitsChange(
            concurrency=concurrency, rate=rate, period=period, paused=paused, timeout=timeout,
            max_retries=max_retries, priority=priority, lease=lease,
        )  # fmt: skip
        return self.executor.run(self.plans.each(merge_limits, quotas.set_limits, name, change))

    def names_with_limits(self, cursor: int = 0, count: int = 100) -> LimitsPage:
        """A page of the task names with limits (cursor 0: no more)."""
        return self.executor.execute(self.plans.first(quotas.names_with_limits, cursor, count))

    def tenants_with_shares(self, cursor: int = 0, count: int = 100) -> SharesPage:
        """A page of the tenants whose shares are not all defaults (cursor 0: no more)."""
        return self.executor.run(
            self.plans.paged(SharesPage, cursor, count, quotas.tenants_with_shares)
        )

    def fairness(self, minutes: int = 5, top: int = 20) -> FairnessView:
        """Who the queue served over the last ``minutes`` (1 to 10): starts and waits
        from ready to start, overall and for the ``top`` busiest tenants, with their
        shares. Its cost is bounded by minutes x top, whatever the number of tenants."""
        return self.executor.run(
            self.plans.each(
                functools.partial(merge_fairness, top=top), figures.fairness, minutes, top
            )
        )

    def hand_over(
        self,
        tasks: Sequence[LeasedTask],
        delay: float = HAND_OVER_DELAY,
        grace: float = UNSERVED_GRACE,
    ) -> list[str]:
        """Gives back leased tasks whose function this worker lacks (no attempt counted);
        one that no live worker serves for ``grace`` s fails. Returns ids whose lease was lost."""
        return self.executor.run(self.plans.by_tasks(tasks, leases.hand_over, delay, grace))

    @property
    def one_namespace(self) -> FairQueue | None:
        """This queue as one namespace, when it is one: then its pop can wait for work
        (``pop(wait=...)``) and finish tasks in the same call (``finish_and_pop``). None
        for a sharded queue, whose pops visit several namespaces."""
        return None


class FairQueue(Queue):
    """A fair multi-tenant queue in one namespace of a Redis / Valkey server.

    >>> q = FairQueue()  # embedded Valkey, or $FAIRQUE_REDIS_URL  # doctest: +SKIP
    >>> q.push(Task(user_id="alice", payload={"n": 1}))  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str | None = None,
        namespace: str | Namespace = "default",
        *,
        settings: QueueSettings | None = None,
        client: SyncClient | None = None,
        executor: Executor | None = None,
        hooks: ClientHooks | None = None,
    ) -> None:
        # Another client's ``namespace`` (a Namespace) names the same one.
        name = namespace.name if isinstance(namespace, Namespace) else namespace
        super().__init__(url, [name], settings, client, executor, hooks=hooks)
        self.namespace = self.plans.shards[0]  # its keys and settings
        self.name = name  # the namespace's name

    def finish_and_pop(
        self,
        tasks: Sequence[LeasedTask],
        results: Sequence[Any] | None = None,
        *,
        count: int = 1,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        worker_id: str | None = None,
        lease_seconds: float | None = None,
        names: Sequence[str] | None = None,
    ) -> tuple[list[str], list[LeasedTask]]:
        """:meth:`finish_many` then :meth:`pop` in one atomic call, as a worker sends the
        acknowledgements of the tasks it ran with the pop for the slots they freed: the
        same effect and replies as the two calls in turn, at the server cost and round
        trip of one. Returns the ids whose lease was lost, and the tasks leased. The pop
        does not wait: it would hold the acknowledgements back."""
        return self.executor.run(
            self.plans.finish_and_pop(
                tasks,
                results,
                count=count,
                assigned_users=assigned_users,
                steal_targets=steal_targets,
                worker_id=worker_id,
                lease_seconds=lease_seconds,
                names=names,
            )
        )

    def execute(self, call: Call[T]) -> T:
        """Sends a call built by an entry point's ops; its parsed reply."""
        return self.executor.execute(call)

    def pop_after_wait(
        self,
        wait: float,
        count: int = 1,
        *,
        worker_id: str | None = None,
        lease_seconds: float | None = None,
        names: Sequence[str] | None = None,
    ) -> list[LeasedTask]:
        """Waits up to ``wait`` seconds for work in the lanes of ``names`` (None: any),
        then pops as :meth:`pop` does, in one round trip: the pop runs the moment work
        arrives. Unlike ``pop(wait=...)`` it does not ask when work comes due: the
        caller bounds ``wait`` by it (an idle worker knows it from its :meth:`upkeep`).
        :meth:`stop_waiting` ends the wait."""
        lease: dict[str, Any] = {"assigned_users": None, "steal_targets": None,
                                 "worker_id": worker_id, "lease_seconds": lease_seconds,
                                 "names": names}  # fmt: skip
        plan = self.plans.pop_after_wait(self.namespace, count, lease, wait)
        return self.executor.run(plan)

    def idle_pop(
        self,
        wait: float,
        count: int = 1,
        *,
        worker_id: str,
        ttl: float,
        longest_wait: float,
        round_interval: float,
        lease_seconds: float | None = None,
        names: Sequence[str] | None = None,
    ) -> tuple[list[LeasedTask], WorkerUpkeep | None]:
        """An idle worker's wait and pop in one round trip, as :meth:`pop_after_wait`;
        when the pop leases nothing, the same call is the worker's :meth:`upkeep` for its
        next wait (its registration kept ``ttl`` seconds more if it is registered: it is
        not registered again, nor its record written; ``longest_wait``) and runs the
        namespace's maintenance round if one is due (``round_interval`` seconds after
        the last): one script call a wait, where an idle worker made three. Returns the
        tasks leased and the upkeep, or None when tasks were leased. The upkeep's
        ``registered`` False asks for an :meth:`upkeep`; its ``round_due`` says that the
        round hit its bound: :meth:`maintain` goes on."""
        idle: dict[str, Any] = {"worker_id": worker_id, "ttl": ttl,
                                "longest_wait": longest_wait, "round_interval": round_interval,
                                "lease_seconds": lease_seconds, "names": names}  # fmt: skip
        return self.executor.run(self.plans.idle_pop(self.namespace, wait, count, idle))

    @property
    def one_namespace(self) -> FairQueue:
        """Itself: one namespace."""
        return self


class ShardedQueue(Queue):
    """One logical queue split over ``shards`` namespaces ``<namespace>:<i>`` (see
    :mod:`fairque.queue.plans`).

    >>> q = ShardedQueue("redis+cluster://10.0.0.1:6379", "jobs", shards=12)  # doctest: +SKIP
    >>> q.push(Task(user_id="alice"))  # to shard crc32("alice") % 12  # doctest: +SKIP
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
        hooks: ClientHooks | None = None,
    ) -> None:
        names = shard_namespaces(namespace, shards)
        super().__init__(url, names, settings, client, executor, hooks=hooks)
        self.name = namespace  # the logical queue's name, without a shard's suffix
        # Each shard as a queue of its own, on the same connection pool, with the same hooks.
        self.shards = [
            FairQueue(namespace=name, executor=self.executor, hooks=self.hooks) for name in names
        ]

    def shard_for(self, tenant: str) -> FairQueue:
        """The shard that holds ``tenant``'s tasks."""
        return self.shards[self.plans.shard_of(tenant)]


def open_queue(
    url: str | None,
    namespace: str,
    shards: int = 1,
    *,
    settings: QueueSettings | None = None,
    executor: Executor | None = None,
    hooks: ClientHooks | None = None,
) -> FairQueue | ShardedQueue:
    """An :class:`FairQueue`, or an :class:`ShardedQueue` when ``shards`` > 1."""
    if shards > 1:
        return ShardedQueue(
            url, namespace, shards=shards, settings=settings, executor=executor, hooks=hooks
        )
    return FairQueue(url, namespace, settings=settings, executor=executor, hooks=hooks)
