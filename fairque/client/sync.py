"""The blocking client: a thin facade that sends :mod:`fairque.ops` calls with redis-py."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any, TypeVar

from redis.exceptions import NoScriptError, ResponseError

from fairque.client import replicated
from fairque.client.connect import SyncClient, sync_client
from fairque.config import QueueSettings, redis_url
from fairque.models import LeasedTask, QueueStats, Task, TaskInfo, TaskPage, TaskState
from fairque.ops import Call, Maintenance, Ops

T = TypeVar("T")
Q = TypeVar("Q", bound="FairQueue")  # a subclass enters as itself


class FairQueue:
    """A fair multi-tenant queue in one namespace of a Redis / Valkey server.

    >>> q = FairQueue()  # embedded Valkey, or $FAIRQUE_REDIS_URL  # doctest: +SKIP
    >>> q.push(Task(user_id="alice", payload={"n": 1}))  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str | None = None,
        namespace: str = "default",
        *,
        settings: QueueSettings | None = None,
        client: SyncClient | None = None,
    ) -> None:
        self.ops = Ops(namespace, settings or QueueSettings())
        self.redis = client or sync_client(redis_url(url))

    @property
    def wake_channels(self) -> list[str]:
        """The sharded pub/sub channels published when tasks become ready."""
        return [self.ops.wake_channel]

    def execute(self, call: Call[T]) -> T:
        """Sends a call built by :mod:`fairque.ops` (or :mod:`fairque.jobs`); its parsed reply."""
        return self._run(call)

    def _run(self, call: Call[T]) -> T:
        keys_and_args = (*call.keys, *call.args)
        try:
            try:
                reply = self.redis.evalsha(call.script.sha, len(call.keys), *keys_and_args)
            except NoScriptError:
                reply = self.redis.eval(call.script.source, len(call.keys), *keys_and_args)
        except ResponseError as exc:
            raise replicated.script_failure(exc) from None
        return call.parse(reply)

    def _run_replicated(self, call: Call[T], replicas: int, timeout: float) -> T:
        """Runs ``call``, then waits until ``replicas`` replicas have it (WAIT)."""
        replicated.check(replicas, timeout)
        if not replicas:
            return self._run(call)
        pipe = replicated.pipeline(self.redis, call, replicas, timeout, source=False)
        results = pipe.execute(raise_on_error=False)
        if replicated.needs_source(results):
            pipe = replicated.pipeline(self.redis, call, replicas, timeout, source=True)
            results = pipe.execute(raise_on_error=False)
        return replicated.replicated_reply(call, results, replicas)

    def push(self, task: Task, *, replicas: int = 0, replica_timeout: float = 1.0) -> str:
        """Enqueues one task; returns its id. With ``replicas``, see :meth:`push_many`."""
        return self._run_replicated(self.ops.push_one(task), replicas, replica_timeout)

    def push_many(
        self, tasks: Sequence[Task], *, replicas: int = 0, replica_timeout: float = 1.0
    ) -> list[str]:
        """Enqueues tasks atomically (all or none); returns their ids in order.

        With ``replicas`` > 0 it also waits up to ``replica_timeout`` seconds until that
        many replicas have the push (``WAIT``), so a failover cannot lose it; if fewer
        confirm in time it raises :class:`NotReplicated` (the push was made).
        """
        return self._run_replicated(self.ops.push(tasks), replicas, replica_timeout)

    def pop(
        self,
        count: int = 1,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        worker_id: str | None = None,
        lease_seconds: float | None = None,
    ) -> list[LeasedTask]:
        """Leases up to ``count`` ready tasks, fairly across tenants; [] when none is ready."""
        call = self.ops.pop(count, assigned_users, steal_targets, worker_id, lease_seconds)
        return self._run(call)

    def finish(self, task: LeasedTask, result: Any = None) -> None:
        """Marks a leased task FINISHED; raises :class:`LeaseLost` if the lease was lost."""
        self._run(self.ops.finish_one(task, result))

    def finish_many(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None
    ) -> list[str]:
        """Finishes many tasks in one call; returns the ids whose lease was lost."""
        return self._run(self.ops.finish(tasks, results or [None] * len(tasks)))

    def release(self, tasks: Sequence[LeasedTask]) -> list[str]:
        """Hands leased tasks back now, attempts unchanged; returns ids whose lease was lost."""
        return self._run(self.ops.release(tasks))

    def fail(self, task: LeasedTask, error: str = "", *, retry: bool = True) -> TaskState:
        """Fails an attempt; returns SCHEDULED (retry after backoff) or FAILED."""
        return self._run(self.ops.fail(task, error, retry))

    def extend(self, task: LeasedTask, seconds: float) -> float:
        """Extends the lease to now + ``seconds``; returns (and records) the new deadline."""
        return self._run(self.ops.extend(task, seconds))

    def cancel(self, task_id: str) -> bool:
        """Cancels a task that has not started; False if it is running or has ended."""
        return self._run(self.ops.cancel(task_id))

    def retry(self, task_id: str) -> bool:
        """Queues a FAILED task again now; False if it had not failed."""
        return self._run(self.ops.retry(task_id))

    def xcom_push(self, task_id: str, key: str, value: Any, ttl: float | None = None) -> None:
        """Stores ``value`` (MessagePack) under ``key`` for the dependents of ``task_id``."""
        self._run(self.ops.xcom_push(task_id, key, value, ttl))

    def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Any:
        """What ``task_id`` stored under ``key``; ``default`` if nothing (or it expired)."""
        return self._run(self.ops.xcom_pull(task_id, key, default))

    def tasks(
        self,
        state: TaskState | str,
        user_id: str | None = None,
        name: str | None = None,
        cursor: int = 0,
        limit: int = 50,
    ) -> TaskPage:
        """A page of the tasks in ``state`` (of ``user_id`` / ``name``); see ``Ops.tasks``."""
        return self._run(self.ops.tasks(state, user_id, name, cursor, limit))

    def retry_failed(self, user_id: str) -> int:
        """Queues every FAILED task of ``user_id`` again, a slice per call; returns how many."""
        retried, cursor = 0, 0
        while True:
            cursor, count = self._run(self.ops.retry_failed(user_id, cursor))
            retried += count
            if not cursor:
                return retried

    def get(self, task_id: str) -> TaskInfo | None:
        """Everything stored about a task, or None if there is no such task."""
        return self._run(self.ops.get(task_id))

    def stats(self) -> QueueStats:
        """Tasks per state, lifetime counters and per-tenant figures."""
        return self._run(self.ops.stats())

    def reap(self, limit: int = 1000) -> Maintenance:
        """Maintenance: expired leases, due scheduled tasks, expired registry entries."""
        return self._run(self.ops.reap(limit))

    def next_due(self) -> float | None:
        """Seconds until a scheduled task is due or a lease expires (0: now); None: neither."""
        return self._run(self.ops.next_due())

    def promote(self, limit: int = 1000) -> int:
        """Makes up to ``limit`` scheduled tasks whose time has come ready."""
        return self._run(self.ops.promote(limit))

    def close(self) -> None:
        """Closes the connection pool."""
        self.redis.close()

    def __enter__(self: Q) -> Q:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
