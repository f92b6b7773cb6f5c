"""The sans-IO core: turns requests into script calls and replies into models.

Nothing here does I/O. :class:`FairQueue` and :class:`AsyncFairQueue` each send a
:class:`Call` and hand the reply to ``call.parse``, so the logic exists once.
"""

from __future__ import annotations

import collections
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Generic, TypeVar

import msgspec

from fairque import lua
from fairque.config import QueueSettings
from fairque.errors import InvalidInput, LeaseLost
from fairque.keys import STORAGE_KEYS, fixed_keys, namespace_prefix
from fairque.models import (
    MAX_TIMEOUT_SECONDS,
    LeasedTask,
    Priority,
    QueueStats,
    Task,
    TaskInfo,
    TaskPage,
    TaskState,
    TaskSummary,
    TenantStats,
    check_identifier,
)

T = TypeVar("T")
Arg = str | bytes | int | float

MAX_BATCH = 10_000
MAX_POP = 1_000
MAX_TENANTS_PER_POP = 1_000
MAX_ERROR_LENGTH = 4_096
MAX_PAGE = 1_000
_POP_ROW = 13
MICROS = 1_000_000

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()


@dataclass(frozen=True)
class Call(Generic[T]):
    """One script call: what to send and how to read the reply."""

    script: lua.Script
    keys: Sequence[str]
    args: Sequence[Arg]
    parse: Callable[[Any], T]


@dataclass(frozen=True)
class Maintenance:
    """What one maintenance pass did."""

    expired: int  # leases that had expired, returned to the queue or failed
    promoted: int  # scheduled tasks made ready
    dropped: int  # ids of expired finished/failed/canceled tasks dropped from registries
    orphaned: int  # deferred tasks canceled because a dependency no longer exists


def encode(value: Any, field: str, limit: int) -> bytes:
    """MessagePack bytes of ``value``; refuses what cannot be serialised or is too big."""
    try:
        data = _encoder.encode(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidInput(field, f"cannot be serialised with MessagePack: {exc}") from None
    if len(data) > limit:
        raise InvalidInput(field, f"is {len(data)} bytes serialised, over the {limit} limit")
    return data


def decode(data: bytes) -> Any:
    """The value MessagePack ``data`` holds."""
    return _decoder.decode(data)


def new_ids(count: int) -> list[str]:
    """``count`` random 128-bit ids as 32 hex digits (one system call for all)."""
    digits = os.urandom(16 * count).hex()
    return [digits[i : i + 32] for i in range(0, 32 * count, 32)]


def default_worker_id() -> str:
    """``host:pid``, the worker id used when none is given."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _text(value: bytes | None) -> str | None:
    return value.decode() if value else None


def _seconds(micros: bytes | None) -> float | None:
    return None if not micros else int(micros) / MICROS


def _max_retries(raw: bytes | str) -> int | None:
    value = int(raw)
    return None if value < 0 else value


def _start_arg(task: Task) -> str:
    """The execute_after field of push: '' (now), absolute us, or '+us' from server time."""
    if task.execute_after is not None:
        return str(int(task.execute_after.timestamp() * MICROS))
    if isinstance(task.delay, timedelta) and task.delay > timedelta(0):
        return f"+{int(task.delay.total_seconds() * MICROS)}"
    return ""


def _dependency_order(ids: list[str], tasks: Sequence[Task]) -> list[int]:
    """Indices of ``tasks`` with every task after the tasks of the batch it depends on
    (the script stores them in this order); refuses a cycle, naming it."""
    position = {task_id: index for index, task_id in enumerate(ids)}
    inner = [[position[d] for d in task.depends_on if d in position] for task in tasks]
    unmet = [len(dependencies) for dependencies in inner]
    dependents: list[list[int]] = [[] for _ in tasks]
    for index, dependencies in enumerate(inner):
        for dependency in dependencies:
            dependents[dependency].append(index)
    ready = collections.deque(index for index, count in enumerate(unmet) if count == 0)
    order: list[int] = []
    while ready:
        index = ready.popleft()
        order.append(index)
        for dependent in dependents[index]:
            unmet[dependent] -= 1
            if unmet[dependent] == 0:
                ready.append(dependent)
    if len(order) < len(tasks):
        # Every task left over waits on another one left over: walking them finds a cycle.
        left = {index for index, count in enumerate(unmet) if count > 0}
        path, index = [], min(left)
        while index not in path:
            path.append(index)
            index = next(dependency for dependency in inner[index] if dependency in left)
        cycle = [ids[i] for i in path[path.index(index) :]] + [ids[index]]
        raise InvalidInput("depends_on", f"dependency cycle: {' -> '.join(cycle)}")
    return order


def _check_positive(value: float, field: str, maximum: float) -> None:
    if not 0 < value <= maximum:
        raise InvalidInput(field, f"must be above 0 and at most {maximum:g}, got {value!r}")


def _check_name(value: str, field: str) -> None:
    try:
        check_identifier(value)
    except ValueError as exc:
        raise InvalidInput(field, str(exc)) from None


def _tenant_list(values: Sequence[str] | None, field: str) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str):
        raise InvalidInput(field, "must be a list of user ids, not a single string")
    if len(values) > MAX_TENANTS_PER_POP:
        raise InvalidInput(field, f"must name at most {MAX_TENANTS_PER_POP} user ids")
    try:
        return [check_identifier(value) for value in values]
    except ValueError as exc:
        raise InvalidInput(field, str(exc)) from None


class Ops:
    """Builds the calls of one namespace with its settings."""

    def __init__(self, namespace: str, settings: QueueSettings) -> None:
        self.namespace = namespace
        self.settings = settings
        self.prefix = namespace_prefix(namespace)
        self._keys = fixed_keys(self.prefix)
        self.wake_channel = self.prefix + "wake"  # published when tasks become ready
        self._head: tuple[Arg, ...] = (
            self.prefix,
            repr(settings.retry_backoff_base),
            repr(settings.retry_backoff_max),
            repr(settings.finished_ttl),
            repr(settings.failed_ttl),
        )

    def _call(
        self,
        name: str,
        args: Sequence[Arg],
        parse: Callable[[Any], T],
        extra_names: tuple[str, ...] = (),
        extra_keys: Sequence[str] = (),
    ) -> Call[T]:
        """The call of script ``name``; ``extra_keys`` follow the fixed keys, and the
        script knows them by ``extra_names``."""
        keys = (*self._keys, *extra_keys) if extra_keys else self._keys
        return Call(lua.load(name, extra_names), keys, (*self._head, *args), parse)

    def push(self, tasks: Sequence[Task]) -> Call[list[str]]:
        """Stores ``tasks`` atomically; the reply parses to their ids, in order."""
        if not tasks:
            raise InvalidInput("tasks", "must not be empty")
        if len(tasks) > MAX_BATCH:
            raise InvalidInput("tasks", f"at most {MAX_BATCH} tasks per push, got {len(tasks)}")
        for task in tasks:
            if not isinstance(task, Task):
                raise InvalidInput("tasks", f"expected Task, got {type(task).__name__}")
        ids = [
            task.task_id or fresh for task, fresh in zip(tasks, new_ids(len(tasks)), strict=True)
        ]
        if len(set(ids)) != len(ids):
            raise InvalidInput("task_id", "the same task_id appears twice in one push")
        rows: list[tuple[Any, ...]] = []
        payloads: list[Arg] = []
        limit = self.settings.max_payload_bytes
        for index in _dependency_order(ids, tasks):
            task, task_id = tasks[index], ids[index]
            payloads.append(encode(task.payload, "payload", limit))
            rows.append(
                (
                    task_id,
                    task.user_id,
                    int(task.priority),
                    task.name or "",
                    -1 if task.max_retries is None else task.max_retries,
                    task.timeout,
                    int(task.keep_result),
                    _start_arg(task),
                    task.depends_on,
                )
            )
        args = (len(tasks), _encoder.encode(rows), *payloads)
        return self._call("push", args, lambda _reply: ids)

    def push_one(self, task: Task) -> Call[str]:
        """Stores one task; the reply parses to its id."""
        call = self.push([task])
        return Call(call.script, call.keys, call.args, lambda reply: call.parse(reply)[0])

    def pop(
        self,
        count: int = 1,
        assigned_users: Sequence[str] | None = None,
        steal_targets: Sequence[str] | None = None,
        worker_id: str | None = None,
        lease_seconds: float | None = None,
    ) -> Call[list[LeasedTask]]:
        """Leases up to ``count`` tasks by the fair policy."""
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_POP:
            raise InvalidInput("count", f"must be an integer from 1 to {MAX_POP}, got {count!r}")
        if lease_seconds is not None:
            _check_positive(lease_seconds, "lease_seconds", MAX_TIMEOUT_SECONDS)
        try:
            worker = check_identifier(default_worker_id() if worker_id is None else worker_id)
        except ValueError as exc:
            raise InvalidInput("worker_id", str(exc)) from None
        args: list[Arg] = [
            worker,
            count,
            "" if lease_seconds is None else repr(lease_seconds),
            self.settings.maintenance_batch,
        ]
        if assigned_users is None and steal_targets is None:
            args.append(0)
        else:
            assigned = _tenant_list(assigned_users, "assigned_users")
            steal = _tenant_list(steal_targets, "steal_targets")
            args += (1, len(assigned), *assigned, len(steal), *steal)
        return self._call("pop", args, _parse_leased)

    def finish(self, tasks: Sequence[LeasedTask], results: Sequence[Any]) -> Call[list[str]]:
        """Acknowledges ``tasks``; the reply parses to the ids whose lease was lost."""
        if len(results) != len(tasks):
            raise InvalidInput("results", "must have one result per task")
        rows: list[tuple[str, str, int]] = []
        kept: list[Arg] = []
        limit = self.settings.max_payload_bytes
        for task, result in zip(tasks, results, strict=True):
            if result is not None:
                kept.append(encode(result, "result", limit))
            rows.append((task.task_id, task.lease_token, 0 if result is None else len(kept)))
        args = (len(tasks), _encoder.encode(rows), *kept)
        return self._call("finish", args, _lost_ids(tasks))

    def finish_one(self, task: LeasedTask, result: Any) -> Call[None]:
        """Acknowledges one task; parsing raises :class:`LeaseLost` if its lease was lost."""
        call = self.finish([task], [result])

        def check(reply: list[int]) -> None:
            if call.parse(reply):
                raise LeaseLost(task.task_id)

        return Call(call.script, call.keys, call.args, check)

    def release(self, tasks: Sequence[LeasedTask]) -> Call[list[str]]:
        """Hands leased tasks back to the queue; parses to the ids whose lease was lost."""
        rows = [(task.task_id, task.lease_token) for task in tasks]
        return self._call("release", (len(tasks), _encoder.encode(rows)), _lost_ids(tasks))

    def fail(self, task: LeasedTask, error: str, retry: bool) -> Call[TaskState]:
        """Ends an attempt as failed; the reply parses to the task's new state."""
        args = (task.task_id, task.lease_token, error[:MAX_ERROR_LENGTH], int(retry))
        return self._call("fail", args, lambda reply: TaskState(reply.decode()))

    def extend(self, task: LeasedTask, seconds: float) -> Call[float]:
        """Moves the lease deadline to now + ``seconds``; parses to the new deadline."""
        _check_positive(seconds, "seconds", MAX_TIMEOUT_SECONDS)
        args = (task.task_id, task.lease_token, repr(seconds))

        def record(reply: int) -> float:
            task.lease_deadline = int(reply) / MICROS
            return task.lease_deadline

        return self._call("extend", args, record)

    def cancel(self, task_id: str) -> Call[bool]:
        """Cancels a task that has not started; parses to whether it was canceled."""
        cancelable = {b"scheduled", b"deferred", b"queued"}
        return self._call("cancel", (task_id,), lambda reply: reply in cancelable)

    def retry(self, task_id: str) -> Call[bool]:
        """Queues a FAILED task again now; parses to whether it was failed."""
        return self._call("retry", (task_id,), lambda reply: reply == b"failed")

    def xcom_push(self, task_id: str, key: str, value: Any, ttl: float | None) -> Call[None]:
        """Stores ``value`` under ``key`` for task ``task_id``'s dependents."""
        _check_name(task_id, "task_id")
        _check_name(key, "key")
        seconds = self.settings.xcom_ttl if ttl is None else ttl
        _check_positive(seconds, "ttl", 366 * 24 * 3600.0)
        data = encode(value, "value", self.settings.max_payload_bytes)
        args = (task_id, key, data, max(1, int(seconds * 1000)))
        return self._call("xcom_push", args, lambda _reply: None)

    def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Call[Any]:
        """The value task ``task_id`` stored under ``key``, or ``default``."""
        _check_name(task_id, "task_id")
        _check_name(key, "key")
        return self._call(
            "xcom_pull", (task_id, key), lambda reply: default if reply is None else decode(reply)
        )

    def tasks(
        self,
        state: TaskState | str,
        user_id: str | None = None,
        name: str | None = None,
        cursor: int = 0,
        limit: int = 50,
    ) -> Call[TaskPage]:
        """A page of the tasks (and strict jobs) in ``state``, of one tenant and / or
        name if given, from ``cursor``; a page may hold fewer than ``limit``."""
        try:
            state = TaskState(state)
        except ValueError:
            states = ", ".join(s.value for s in TaskState)
            raise InvalidInput("state", f"must be one of {states}, got {state!r}") from None
        for value, field in ((user_id, "user_id"), (name, "name")):
            if value is not None:
                _check_name(value, field)
        if isinstance(cursor, bool) or not isinstance(cursor, int) or not 0 <= cursor < 2**53:
            raise InvalidInput("cursor", f"must be an integer from 0 to 2^53, got {cursor!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
            raise InvalidInput("limit", f"must be an integer from 1 to {MAX_PAGE}, got {limit!r}")
        args = (state.value, user_id or "", name or "", cursor, limit)
        return self._call("tasks", args, _parse_page)

    def retry_failed(self, user_id: str, cursor: int = 0) -> Call[tuple[int, int]]:
        """Queues the FAILED tasks of ``user_id`` again, one slice of the failed registry
        (``maintenance_batch`` entries) from ``cursor``; parses to (next cursor, tasks
        queued again). Call it again with the cursor until the cursor is 0."""
        _check_name(user_id, "user_id")
        args = (user_id, cursor, self.settings.maintenance_batch)
        return self._call("retry_failed", args, lambda reply: (int(reply[0]), int(reply[1])))

    def get(self, task_id: str) -> Call[TaskInfo | None]:
        """Reads one task; parses to None when there is no such task."""
        return self._call("get", (task_id,), lambda reply: _parse_info(task_id, reply))

    def stats(self) -> Call[QueueStats]:
        """Counts per state and per tenant."""
        keys = tuple(self.prefix + name for name in STORAGE_KEYS)  # storage tasks count too
        return self._call("stats", (), _parse_stats, STORAGE_KEYS, keys)

    def reap(self, limit: int) -> Call[Maintenance]:
        """One maintenance pass of at most ``limit`` leases and scheduled tasks."""
        return self._call("reap", (limit,), lambda reply: Maintenance(*map(int, reply)))

    def next_due(self) -> Call[float | None]:
        """Seconds until a scheduled task is due or a lease expires; None if neither exists."""
        return self._call("due", (), lambda reply: None if reply < 0 else reply / MICROS)

    def promote(self, limit: int) -> Call[int]:
        """Makes up to ``limit`` due scheduled tasks ready."""
        return self._call("promote", (limit,), int)


def _lost_ids(tasks: Sequence[LeasedTask]) -> Callable[[list[int]], list[str]]:
    """Parses a per-task 1/0 reply to the ids of the tasks whose lease was lost."""

    def lost(reply: list[int]) -> list[str]:
        return [task.task_id for task, ok in zip(tasks, reply, strict=True) if not ok]

    return lost


_PRIORITY_OF = {str(int(priority)).encode(): priority for priority in Priority}


def _parse_leased(reply: list[Any]) -> list[LeasedTask]:
    # The hot path of every worker: positional arguments, no per-field helpers.
    decode = _decoder.decode
    return [
        LeasedTask(
            reply[i].decode(),  # task_id
            reply[i + 1].decode(),  # user_id
            _PRIORITY_OF[reply[i + 2]],
            reply[i + 3].decode() or None,  # name
            decode(reply[i + 4]),  # payload
            int(reply[i + 5]),  # attempts
            reply[i + 6] / MICROS,  # lease_deadline
            str(reply[i + 7]),  # lease_token
            float(reply[i + 8]),  # timeout
            _max_retries(reply[i + 9]),
            int(reply[i + 10]) / MICROS,  # created_at
            int(reply[i + 11]) / MICROS,  # start_time
            _seconds(reply[i + 12]),  # prev_start_time
        )
        for i in range(0, len(reply), _POP_ROW)
    ]


def _parse_info(task_id: str, reply: list[Any]) -> TaskInfo | None:
    flat, result, blocked_by, dependents = reply
    if not flat:
        return None
    fields: dict[str, bytes] = {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}
    if "queue" in fields:
        queue_num = fields["queue"].decode()
        raise InvalidInput("task_id", f"{task_id} is a task of storage queue {queue_num}")
    if "tenant" not in fields:
        raise InvalidInput("task_id", f"{task_id} is a JQ master job: read it with JobQueue.get")
    state = TaskState(fields["state"].decode())
    running = state is TaskState.STARTED
    return TaskInfo(
        task_id=task_id,
        user_id=fields["tenant"].decode(),
        priority=Priority(int(fields["priority"])),
        state=state,
        name=_text(fields.get("name")),
        payload=_decoder.decode(fields["payload"]),
        attempts=int(fields.get("attempts", 0)),
        max_retries=_max_retries(fields["max_retries"]),
        timeout=float(fields["timeout"]),
        keep_result=fields.get("keep_result") == b"1",
        created_at=int(fields["created_at"]) / MICROS,
        execute_after=_seconds(fields.get("execute_after")),
        start_time=_seconds(fields.get("start_time")),
        prev_start_time=_seconds(fields.get("prev_start_time")),
        leased_at=_seconds(fields.get("leased_at")),
        lease_deadline=_seconds(fields.get("lease_deadline")) if running else None,
        lease_token=_text(fields.get("lease_token")),
        worker_id=_text(fields.get("worker_id")),
        last_error=_text(fields.get("last_error")),
        finished_at=_seconds(fields.get("finished_at")),
        result=None if result is None else _decoder.decode(result),
        has_result=result is not None,
        blocked_by=tuple(sorted(task_id.decode() for task_id in blocked_by)),
        dependents=tuple(sorted(task_id.decode() for task_id in dependents)),
    )


_PAGE_ROW = 8


def _parse_page(reply: list[Any]) -> TaskPage:
    rows = reply[1:]
    tasks = [
        TaskSummary(
            task_id=rows[i].decode(),
            user_id=_text(rows[i + 1]),
            name=_text(rows[i + 2]),
            state=_text(rows[i + 3]) or "expired",
            priority=int(rows[i + 4] or 0),
            attempts=int(rows[i + 5] or 0),
            created_at=_seconds(rows[i + 6]),
            worker_id=_text(rows[i + 7]),
        )
        for i in range(0, len(rows), _PAGE_ROW)
    ]
    return TaskPage(tasks=tasks, cursor=int(reply[0]))


def _pairs(flat: list[bytes]) -> dict[str, int]:
    return {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}


def _parse_stats(reply: list[list[bytes]]) -> QueueStats:
    states_flat, counters_flat, ready_flat = reply
    states = {TaskState(name): count for name, count in _pairs(states_flat).items()}
    counters: dict[str, int] = {}
    per_tenant: dict[str, dict[str, int]] = {}
    for name, value in _pairs(counters_flat).items():
        counter, _, tenant = name.partition(":")
        if tenant:
            per_tenant.setdefault(tenant, {})[counter] = value
        else:
            counters[counter] = value
    for tenant, ready in _pairs(ready_flat).items():
        per_tenant.setdefault(tenant, {})["queued"] = ready
    known = set(TenantStats.__dataclass_fields__)
    tenants = {
        tenant: TenantStats(**{k: v for k, v in values.items() if k in known})
        for tenant, values in sorted(per_tenant.items())
    }
    return QueueStats(states=states, counters=counters, tenants=tenants)
