"""The fair queue's sans-IO core: turns requests into script calls and replies into models.

Nothing here does I/O: :class:`fairque.FairQueue` and :class:`fairque.AsyncFairQueue` send
each :class:`~fairque.engine.Call` through an executor, so the logic exists once.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from fairque.config import MAX_PAYLOAD_BYTES
from fairque.engine import records
from fairque.engine.calls import (
    MAX_BATCH,
    MAX_ERROR_LENGTH,
    MAX_PAGE,
    MAX_POP,
    MICROS,
    Arg,
    Call,
    Wait,
    decode,
    default_worker_id,
    encode,
    flat_rows,
    new_ids,
    pack,
    seconds,
    text,
)
from fairque.engine.keys import Namespace
from fairque.engine.records import (
    MAX_TIMEOUT_SECONDS,
    Record,
    RecordKind,
    TaskState,
    check_identifier,
)
from fairque.errors import (
    InvalidInput,
    LeaseLost,
    ResultNotKept,
    ResultTimeout,
    TaskFailed,
    TaskNotFound,
)
from fairque.queue.models import (
    STATS_TENANTS,
    Backlog,
    FairnessView,
    LeasedTask,
    LimitsPage,
    Maintenance,
    MaintenanceStatus,
    MinuteFigures,
    Priority,
    QueueStats,
    SharesPage,
    Task,
    TaskInfo,
    TaskLimits,
    TaskPage,
    TaskSummary,
    TenantService,
    TenantShares,
    TenantStats,
    TenantStatsPage,
    WorkerInfo,
    check_headers,
)
from fairque.queue.shares import (
    LIMIT_ARGS,
    LIMITS,
    SHARES,
    SharesChangeModel,
    change_args,
    read_shares,
)

T = TypeVar("T")

MAX_TENANTS_PER_POP = 1_000
MAX_NAMES_PER_POP = 1_000
MAX_POP_WAIT = 3_600.0  # seconds a pop may wait for work
MIN_POP_WAIT = 0.001  # BLPOP's resolution: a shorter wait would be read as "for ever"
STATS_FAIRNESS_MINUTES, STATS_FAIRNESS_TOP = 5, 20  # as namespace/stats.lua reads them
MAX_FAIRNESS_TOP = 100  # tenants whose fairness figures one call reads
MAINTENANCE_INTERVAL = 2.0  # seconds between a namespace's maintenance rounds
MAINTENANCE_ROUNDS = 100  # rounds in a row, at most, while each hits its bound
HAND_OVER_DELAY = 1.0  # seconds before a task handed over is offered again
UNSERVED_GRACE = 60.0  # seconds a task may wait for a live worker that serves its function
_POP_ROW = 14


@dataclass(frozen=True, slots=True)
class PushRow:
    """One task ready to be pushed (:meth:`QueueOps.push_row`): its id, its row of the
    push script's arguments (flat: the rows of a push are sent one after the other, see
    ``queue/push.lua``), its payload bytes and the ids it depends on."""

    task_id: str
    row: tuple[Any, ...]
    payload: bytes
    depends_on: tuple[str, ...]


@dataclass(frozen=True)
class Settled:
    """A wait that is over: the task finished with ``result``."""

    result: Any


class ResultWait:
    """The decisions of ``queue.result(task_id, timeout)``, without I/O.

    The client reads the task, asks :meth:`settle` whether the wait is over, and if not
    waits for the task's id on the namespace's ``ended`` channel for :meth:`next_wait`
    seconds (the finishing script publishes it), then reads it again.
    """

    def __init__(
        self,
        task_id: str,
        timeout: float | None,
        recheck: float,
        on_progress: Callable[[TaskInfo], None] | None = None,
    ) -> None:
        _check_name(task_id, "task_id")
        if timeout is not None and not 0 <= timeout <= MAX_TIMEOUT_SECONDS:
            raise InvalidInput(
                "timeout", f"must be None or 0 to {MAX_TIMEOUT_SECONDS:g} s, got {timeout!r}"
            )
        self.task_id = task_id
        self.timeout = timeout
        self.recheck = recheck
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.state = "unknown"
        self.on_progress = on_progress
        self.reported: tuple[Any, ...] = (None, None, ())  # progress, message, logs seen

    def settle(self, info: TaskInfo | None) -> Settled | None:
        """The result if the task finished; None while it has not ended (``on_progress``
        gets ``info`` first when its progress or log lines changed). Raises
        :class:`TaskFailed` (failed or canceled), :class:`ResultNotKept` (pushed without
        ``keep_result``) or :class:`TaskNotFound`."""
        if info is None:
            raise TaskNotFound(self.task_id)
        self.state = info.state.value
        reported = (info.progress, info.progress_message, info.logs)
        if self.on_progress is not None and reported != self.reported:
            self.reported = reported
            self.on_progress(info)
        if info.state in (TaskState.FAILED, TaskState.CANCELED):
            raise TaskFailed(self.task_id, info.state.value, info.last_error)
        if not info.keep_result:
            raise ResultNotKept(self.task_id)
        if info.state is TaskState.FINISHED:
            return Settled(info.result)
        return None

    def next_wait(self) -> float:
        """Seconds to wait for the task's end message before reading it again (at most
        ``recheck``: a message lost with a connection is not waited for forever);
        raises :class:`ResultTimeout` once the timeout has passed."""
        if self.deadline is None:
            return self.recheck
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise ResultTimeout(self.task_id, self.timeout or 0.0, self.state)
        return min(left, self.recheck)


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


def _headers_arg(task: Task) -> dict[str, str] | str:
    """The headers field of push: '' (none: the record gets no field), else the map.
    Checked again here, for a task a hook made with ``model_copy`` (which validates
    nothing)."""
    if not task.headers:
        return ""
    try:
        return check_headers(task.headers)
    except ValueError as exc:
        raise InvalidInput("headers", str(exc)) from None


def _dependency_order(ids: list[str], depends_on: Sequence[Sequence[str]]) -> list[int]:
    """Indices of the tasks ``ids`` with every task after the tasks of the batch it
    depends on (``depends_on[i]``: task i's) (the script stores them in this order);
    refuses a cycle, naming it."""
    position = {task_id: index for index, task_id in enumerate(ids)}
    inner = [[position[d] for d in named if d in position] for named in depends_on]
    unmet = [len(dependencies) for dependencies in inner]
    dependents: list[list[int]] = [[] for _ in ids]
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
    if len(order) < len(ids):
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


def _names(values: Sequence[str] | None) -> list[str]:
    """The task names a pop serves, each once, in their order; refused if not names."""
    if values is None:
        return []
    if isinstance(values, str):
        raise InvalidInput("names", "must be a list of task names, not a single string")
    if not values:
        raise InvalidInput("names", "must name at least one task name (None: any name)")
    if len(values) > MAX_NAMES_PER_POP:
        raise InvalidInput("names", f"must name at most {MAX_NAMES_PER_POP} task names")
    try:
        return list(dict.fromkeys(check_identifier(value) for value in values))
    except ValueError as exc:
        raise InvalidInput("names", str(exc)) from None


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


class QueueOps:
    """Builds the fair queue's calls in one namespace."""

    def __init__(self, namespace: Namespace) -> None:
        self.namespace = namespace

    def push(self, tasks: Sequence[Task]) -> Call[list[str]]:
        """Stores ``tasks`` atomically; the reply parses to their ids, in order."""
        if not tasks:
            raise InvalidInput("tasks", "must not be empty")
        if len(tasks) > MAX_BATCH:
            raise InvalidInput("tasks", f"at most {MAX_BATCH} tasks per push, got {len(tasks)}")
        for task in tasks:
            if not isinstance(task, Task):
                raise InvalidInput("tasks", f"expected Task, got {type(task).__name__}")
        fresh = new_ids(len(tasks))
        rows = [self.push_row(task, id_) for task, id_ in zip(tasks, fresh, strict=True)]
        return self.push_rows(rows)

    def push_one(self, task: Task) -> Call[str]:
        """Stores one task; the reply parses to its id."""
        row = self.push_row(task)
        task_id = row.task_id
        args = (1, pack(row.row), row.payload)
        return self.namespace.call("queue/push", args, lambda _reply: task_id)

    def push_row(self, task: Task, fresh_id: str | None = None) -> PushRow:
        """One task made ready to push: refuses what is not a :class:`Task` or a payload
        that cannot be serialised or is too big, before anything is sent. Its id is the
        task's own, else ``fresh_id``, else a new one."""
        if not isinstance(task, Task):
            raise InvalidInput("tasks", f"expected Task, got {type(task).__name__}")
        task_id = task.task_id or fresh_id or new_ids(1)[0]
        # The namespace's own limit (its settings, in the server) is checked by the script.
        payload = encode(task.payload, "payload", MAX_PAYLOAD_BYTES)
        row = (
            task_id,
            task.user_id,
            int(task.priority),
            task.name or "",
            -1 if task.max_retries is None else task.max_retries,
            task.timeout,
            int(task.keep_result),
            _start_arg(task),
            _headers_arg(task),
            len(task.depends_on),
            *task.depends_on,
        )
        return PushRow(task_id, row, payload, task.depends_on)

    def push_rows(self, rows: Sequence[PushRow]) -> Call[list[str]]:
        """Stores the tasks of ``rows`` (see :meth:`push_row`) atomically; the reply
        parses to their ids, in the order given. Refuses an id given twice and a
        dependency cycle among them."""
        if not rows:
            raise InvalidInput("tasks", "must not be empty")
        if len(rows) > MAX_BATCH:
            raise InvalidInput("tasks", f"at most {MAX_BATCH} tasks per push, got {len(rows)}")
        ids = [row.task_id for row in rows]
        if len(rows) > 1:
            if len(set(ids)) != len(ids):
                raise InvalidInput("task_id", "the same task_id appears twice in one push")
            if any(row.depends_on for row in rows):  # else the order given is the order
                order = _dependency_order(ids, [row.depends_on for row in rows])
                rows = [rows[index] for index in order]
        args: list[Arg] = [len(rows), pack([value for row in rows for value in row.row])]
        args.extend(row.payload for row in rows)
        return self.namespace.call("queue/push", args, lambda _reply: ids)

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
    ) -> Call[Leased]:
        """Leases up to ``count`` tasks by the fair policy (see :class:`Leased`): of the
        task ``names`` given, then of names no live worker serves (to hand over: see
        ``queue/pop.lua``), or of any name when none are given. With ``wait``, once a
        tenant may be served or ``wait`` seconds have passed (the wake-up tokens of the
        names' lanes, see ``include/ready.lua``)."""
        served = _names(names)
        args = self._pop_args(
            count, assigned_users, steal_targets, worker_id, lease_seconds, served=served
        )
        if wait is not None:
            _check_positive(wait, "wait", MAX_POP_WAIT)
        call = self.namespace.call("queue/pop", args, _parse_leased)
        if wait is None:
            return call
        tokens = tuple(self.namespace.lane_key(name, "wakeups") for name in served)
        return call.after(
            Wait(tokens or (self.namespace.key("wakeups:any"),), max(wait, MIN_POP_WAIT))
        )

    @staticmethod
    def _pop_args(
        count: int,
        assigned_users: Sequence[str] | None,
        steal_targets: Sequence[str] | None,
        worker_id: str | None,
        lease_seconds: float | None,
        *,
        served: list[str],
    ) -> list[Arg]:
        """A pop's arguments (``queue/pop.lua``'s ARGV[2..]), checked; ``served`` are the
        task names it serves (:func:`_names`)."""
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
            len(served),
            *served,
        ]
        if assigned_users is None and steal_targets is None:
            args.append(0)
        else:
            assigned = _tenant_list(assigned_users, "assigned_users")
            steal = _tenant_list(steal_targets, "steal_targets")
            args += (1, len(assigned), *assigned, len(steal), *steal)
        return args

    def register_worker(self, worker: WorkerInfo, ttl: float) -> Call[None]:
        """Registers (or keeps registered) a live worker for ``ttl`` seconds."""
        _check_name(worker.worker_id, "worker_id")
        _check_positive(ttl, "ttl", 3600.0)
        for name in worker.functions:
            _check_name(name, "functions")
        record = {
            "id": worker.worker_id, "host": worker.host, "pid": worker.pid,
            "functions": list(worker.functions), "concurrency": worker.concurrency,
            "in_flight": worker.in_flight, "started_at": worker.started_at,
        }  # fmt: skip
        args = ("beat", worker.worker_id, encode(record, "worker", 1024 * 1024), int(ttl * MICROS))
        return self.namespace.call("queue/workers", args, lambda _reply: None)

    def unregister_worker(self, worker_id: str) -> Call[None]:
        """A worker that stops leaves the registry at once."""
        _check_name(worker_id, "worker_id")
        return self.namespace.call("queue/workers", ("leave", worker_id), lambda _reply: None)

    def workers(self) -> Call[list[WorkerInfo]]:
        """The live workers, by id."""
        return self.namespace.call("queue/workers", ("list",), _parse_workers)

    def hand_over(self, tasks: Sequence[LeasedTask], delay: float, grace: float) -> Call[list[str]]:
        """Gives back tasks whose function this worker lacks (no attempt counted), due again
        after ``delay`` s for a worker that has it; one that no live worker has served for
        ``grace`` s fails. Parses to the ids whose lease was lost."""
        _check_positive(delay, "delay", 3600.0)
        _check_positive(grace, "grace", 7 * 24 * 3600.0)
        rows = [value for task in tasks for value in (task.task_id, task.lease_token)]
        args = (len(tasks), pack(rows), int(delay * MICROS), int(grace * MICROS))
        return self.namespace.call("queue/hand_over", args, _lost_ids(tasks))

    def fail_unreadable(self, task: Unreadable) -> Call[TaskState]:
        """Fails, for good, a task a pop leased but could not read (its error names the
        field): it never reaches a worker, and the rest of its batch is delivered."""
        return self.fail(task, task.error, retry=False)

    def finish(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None
    ) -> Call[list[str]]:
        """Acknowledges ``tasks`` (with ``results``, one per task, if given); the reply
        parses to the ids whose lease was lost."""
        rows, kept = self._finish_args(tasks, results)
        return self.namespace.call("queue/finish", (len(tasks), rows, *kept), _lost_ids(tasks))

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
    ) -> Call[tuple[list[str], Leased]]:
        """:meth:`finish` then :meth:`pop` (which does not wait) in one atomic call
        (``queue/finish_pop.lua``): the reply parses to the ids whose lease was lost and
        the tasks leased."""
        rows, kept = self._finish_args(tasks, results)
        pop_args = self._pop_args(
            count, assigned_users, steal_targets, worker_id, lease_seconds, served=_names(names)
        )
        args = (len(tasks), rows, len(kept), *kept, *pop_args)
        lost_of = _lost_ids(tasks)
        finished = len(tasks)

        def parse(reply: list[Any]) -> tuple[list[str], Leased]:
            return lost_of(reply[:finished]), _parse_leased(reply[finished:])

        return self.namespace.call("queue/finish_pop", args, parse)

    @staticmethod
    def _finish_args(
        tasks: Sequence[LeasedTask], results: Sequence[Any] | None
    ) -> tuple[bytes, list[Arg]]:
        """A finish's rows (id, lease token, result slot), packed, and the results kept
        (each serialised, checked against the size limit), which the slots number from 1."""
        if results is None:
            results = [None] * len(tasks)
        if len(results) != len(tasks):
            raise InvalidInput("results", "must have one result per task")
        rows: list[str | int] = []  # (id, lease token, result slot) one after the other
        kept: list[Arg] = []
        limit = MAX_PAYLOAD_BYTES
        for task, result in zip(tasks, results, strict=True):
            if result is not None:
                kept.append(encode(result, "result", limit))
            rows += (task.task_id, task.lease_token, 0 if result is None else len(kept))
        return pack(rows), kept

    def finish_one(self, task: LeasedTask, result: Any) -> Call[None]:
        """Acknowledges one task; parsing raises :class:`LeaseLost` if its lease was lost."""

        def check(lost: list[str]) -> None:
            if lost:
                raise LeaseLost(task.task_id)

        return self.finish([task], [result]).then(check)

    def release(self, tasks: Sequence[LeasedTask]) -> Call[list[str]]:
        """Hands leased tasks back to the queue; parses to the ids whose lease was lost."""
        rows = [value for task in tasks for value in (task.task_id, task.lease_token)]
        return self.namespace.call("queue/release", (len(tasks), pack(rows)), _lost_ids(tasks))

    def fail(self, task: LeasedTask | Unreadable, error: str, retry: bool) -> Call[TaskState]:
        """Ends an attempt as failed; the reply parses to the task's new state."""
        args = (task.task_id, task.lease_token, error[:MAX_ERROR_LENGTH], int(retry))
        return self.namespace.call("queue/fail", args, lambda reply: TaskState(reply.decode()))

    def extend(self, task: LeasedTask, seconds: float) -> Call[float]:
        """Moves the lease deadline to now + ``seconds``; parses to the new deadline."""
        _check_positive(seconds, "seconds", MAX_TIMEOUT_SECONDS)
        args = (task.task_id, task.lease_token, repr(seconds))

        def record(reply: int) -> float:
            task.lease_deadline = int(reply) / MICROS
            return task.lease_deadline

        return self.namespace.call("queue/extend", args, record)

    def report(
        self,
        task: LeasedTask,
        progress: float | None = None,
        message: str = "",
        lines: Sequence[str] = (),
    ) -> Call[int]:
        """Records a running task's progress (any finite number, with a message) and log
        lines (bounded: records.report); parses to the lines the record holds. Raises
        LeaseLost if the caller no longer holds the task."""
        return records.report(
            self.namespace,
            task.task_id,
            task.lease_token,
            progress=progress,
            message=message,
            lines=lines,
        )

    def cancel(self, task_id: str) -> Call[bool]:
        """Cancels a task that has not ended; parses to whether it was canceled. One
        that runs is aborted: its worker stops the run."""
        return records.cancel(self.namespace, task_id, abort=True)

    def retry(self, task_id: str) -> Call[bool]:
        """Queues a FAILED task again now; parses to whether it was failed."""
        return records.retry(self.namespace, task_id)

    def xcom_push(self, task_id: str, key: str, value: Any, ttl: float | None) -> Call[None]:
        """Stores ``value`` under ``key`` for task ``task_id``'s dependents."""
        _check_name(task_id, "task_id")
        _check_name(key, "key")
        if ttl is not None:
            _check_positive(ttl, "ttl", 366 * 24 * 3600.0)
        data = encode(value, "value", MAX_PAYLOAD_BYTES)
        args = (key, data, "" if ttl is None else max(1, int(ttl * 1000)))
        return self.namespace.call(
            "queue/xcom_push", args, lambda _reply: None, params={"task": task_id}
        )

    def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Call[Any]:
        """The value task ``task_id`` stored under ``key``, or ``default``."""
        _check_name(task_id, "task_id")
        _check_name(key, "key")
        return self.namespace.call(
            "queue/xcom_pull",
            (key,),
            lambda reply: default if reply is None else decode(reply),
            params={"task": task_id},
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
        return self.namespace.call("namespace/tasks", args, _parse_page)

    def retry_failed(self, user_id: str, cursor: int = 0) -> Call[tuple[int, int]]:
        """Queues the FAILED tasks of ``user_id`` again, one slice of the failed registry
        (``maintenance_batch`` entries) from ``cursor``; parses to (next cursor, tasks
        queued again). Call it again with the cursor until the cursor is 0."""
        _check_name(user_id, "user_id")
        args = (user_id, cursor)
        return self.namespace.call(
            "queue/retry_failed", args, lambda reply: (int(reply[0]), int(reply[1]))
        )

    def get(self, task_id: str) -> Call[TaskInfo | None]:
        """Reads one task; parses to None when there is no such task."""
        return self.get_record(task_id).then(_task_info)

    def get_record(self, record_id: str) -> Call[Record | None]:
        """Reads a record of any kind; parses to None when there is no such record."""
        return records.get(self.namespace, record_id)

    def stats(self, fairness_top: int = STATS_FAIRNESS_TOP) -> Call[QueueStats]:
        """Counts per state, counters, and the busiest tenants' figures (O(1) in tenants),
        with the fairness figures of the ``fairness_top`` busiest (0 to 100)."""
        top = fairness_top
        if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_FAIRNESS_TOP:
            raise InvalidInput("fairness_top", f"must be a whole number from 0 to 100, got {top!r}")
        return self.namespace.call("namespace/stats", (STATS_TENANTS, fairness_top), _parse_stats)

    def busiest_tenants(self, cursor: int = 0, count: int = 50) -> Call[TenantStatsPage]:
        """A page of the tenants with ready tasks, the busiest first; pass the cursor back
        for the next page (0: no more)."""
        if isinstance(cursor, bool) or not isinstance(cursor, int) or not 0 <= cursor < 2**53:
            raise InvalidInput("cursor", f"must be 0 or a cursor a page returned, got {cursor!r}")
        _check_positive(count, "count", MAX_PAGE)

        def parse(reply: list[list[Any]]) -> TenantStatsPage:
            tenants = _tenant_rows(reply)
            following = cursor + count if len(tenants) == count else 0
            return TenantStatsPage(tenants, following)

        return self.namespace.call("namespace/tenant_stats", (cursor, int(count)), parse)

    def tenant_stats(self, tenant: str) -> Call[TenantStats]:
        """One tenant's ready tasks and lifetime counters (zero for an unknown tenant)."""
        _check_name(tenant, "user_id")
        return self.namespace.call(
            "namespace/tenant_stats", (0, 1, tenant), lambda reply: _tenant_rows(reply)[tenant]
        )

    def reap(self, limit: int) -> Call[Maintenance]:
        """One maintenance round now, of at most ``limit`` of each kind of work."""
        return self.maintain(limit, 0.0)

    def maintain(self, limit: int | None, interval: float) -> Call[Maintenance]:
        """A maintenance round if the namespace's last one is ``interval`` seconds old
        (whoever ran it), of at most ``limit`` of each kind of work (None: ten times the
        namespace's maintenance_batch); parses to what it did (``ran`` False: none was
        due)."""
        micros = max(0, int(interval * MICROS))
        bound = "" if limit is None else limit
        return self.namespace.call("namespace/reap", (bound, micros), _parse_maintenance)

    def next_due(self, leases: bool = True) -> Call[float | None]:
        """Seconds until something becomes ready without a push: a scheduled task comes
        due, a tenant's rate window opens, or (with ``leases``) a lease expires; None if
        nothing will."""
        return self.namespace.call(
            "namespace/due", ("" if leases else "ready",),
            lambda reply: None if reply < 0 else reply / MICROS,
        )  # fmt: skip

    def backlog(self, tenants: int) -> Call[Backlog]:
        """The age of the oldest ready task of the ``tenants`` busiest tenants and of the
        ``tenants`` the ring served longest ago."""
        if isinstance(tenants, bool) or not isinstance(tenants, int) or not 1 <= tenants <= 100:
            raise InvalidInput("tenants", f"must be an integer from 1 to 100, got {tenants!r}")

        def parse(reply: list[Any]) -> Backlog:
            now = int(reply[0])
            pairs = flat_rows(reply[1:], 2)
            return Backlog({t.decode(): max(0, now - int(at)) / MICROS for t, at in pairs})

        return self.namespace.call("namespace/backlog", (tenants,), parse)

    def promote(self, limit: int) -> Call[int]:
        """Makes up to ``limit`` due scheduled tasks ready."""
        return self.namespace.call("namespace/promote", (limit,), int)

    def tenant(self, tenant: str) -> Call[TenantShares]:
        """A tenant's shares and where it stands (every tenant has them: defaults)."""
        _check_name(tenant, "user_id")
        return self.namespace.call("queue/tenant", ("get", tenant), _shares_of(tenant))

    def set_tenant(self, tenant: str, change: SharesChangeModel) -> Call[TenantShares]:
        """Changes a tenant's shares (None fields keep their value); applies at once."""
        _check_name(tenant, "user_id")
        args = ("set", tenant, *change_args(change.given()))
        return self.namespace.call("queue/tenant", args, _shares_of(tenant))

    def fairness(self, minutes: int = 5, top: int = 20) -> Call[FairnessView]:
        """Who was served over the last ``minutes`` (1 to 10): every start, and the
        ``top`` (1 to 100) busiest tenants with their waits and shares."""
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= 10:
            raise InvalidInput("minutes", f"must be a whole number from 1 to 10, got {minutes!r}")
        if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= MAX_FAIRNESS_TOP:
            raise InvalidInput("top", f"must be a whole number from 1 to 100, got {top!r}")
        return self.namespace.call("namespace/fairness", (minutes, top), _fairness_of(minutes))

    def limits(self, name: str) -> Call[TaskLimits]:
        """A task name's limits and its tasks running (every name has them: none)."""
        _check_name(name, "name")
        return self.namespace.call("queue/limits", ("get", name), _limits_of(name))

    def set_limits(self, name: str, change: SharesChangeModel) -> Call[TaskLimits]:
        """Changes a task name's limits (None fields keep their value); applies at once."""
        _check_name(name, "name")
        args = ("set", name, *change_args(change.given(), LIMIT_ARGS))
        return self.namespace.call("queue/limits", args, _limits_of(name))

    def names_with_limits(self, cursor: int = 0, count: int = 100) -> Call[LimitsPage]:
        """A page of the task names with limits; pass the cursor back (0: no more)."""
        if not 0 <= cursor < 2**63:
            raise InvalidInput("cursor", f"must be 0 or a cursor a page returned, got {cursor}")
        _check_positive(count, "count", MAX_PAGE)
        return self.namespace.call("queue/limits", ("list", cursor, int(count)), _parse_limits_page)

    def tenants_with_shares(self, cursor: int = 0, count: int = 100) -> Call[SharesPage]:
        """A page of the tenants whose shares are not all defaults; pass the cursor back
        for the next page (0: no more)."""
        if not 0 <= cursor < 2**63:
            raise InvalidInput("cursor", f"must be 0 or a cursor a page returned, got {cursor}")
        _check_positive(count, "count", MAX_PAGE)
        return self.namespace.call("queue/tenant", ("list", cursor, int(count)), _parse_shares_page)


def _shares_row(tenant: str, row: list[Any]) -> TenantShares:
    running, ready, servable, opens = (int(value) for value in row[len(SHARES) :])
    return TenantShares(
        tenant, **read_shares(row), running=running, ready=ready, servable=bool(servable),
        window_opens_at=None if opens < 0 else opens / MICROS,
    )  # fmt: skip


def _shares_of(tenant: str) -> Callable[[list[Any]], TenantShares]:
    return lambda row: _shares_row(tenant, row)


def _fairness_of(minutes: int) -> Callable[[list[Any]], FairnessView]:
    def parse(reply: list[Any]) -> FairnessView:
        total = int(reply[1])
        served = []
        for i in range(4, len(reply), 5):
            tenant, starts = reply[i].decode(), int(reply[i + 1])
            served.append(TenantService(
                tenant=tenant, starts=starts, share=starts / total if total else 0.0,
                per_minute=starts / minutes, waits=tuple(int(n) for n in reply[i + 2]),
                starts_by_minute=tuple(int(n) for n in reply[i + 3]),
                shares=_shares_row(tenant, reply[i + 4]),
            ))  # fmt: skip
        history = [
            MinuteFigures(
                at=int(m) * 60.0,
                starts=int(starts),
                pushed=int(pushed),
                finished=int(finished),
                failed=int(failed),
            )
            for m, starts, pushed, finished, failed in reply[3]
        ]
        return FairnessView(
            at=int(reply[0]) / MICROS, minutes=minutes, starts=total,
            waits=tuple(int(n) for n in reply[2]), tenants=served,
            other_starts=total - sum(one.starts for one in served), history=history,
        )  # fmt: skip

    return parse


def _limits_row(name: str, row: list[Any]) -> TaskLimits:
    running, opens = (int(value) for value in row[len(SHARES) :])
    return TaskLimits(
        name, **read_shares(row[1:], LIMITS), running=running,
        window_opens_at=None if opens < 0 else opens / MICROS,
    )  # fmt: skip


def _limits_of(name: str) -> Callable[[list[Any]], TaskLimits]:
    return lambda row: _limits_row(name, row)


def _parse_limits_page(reply: list[Any]) -> LimitsPage:
    names = [_limits_row(reply[i].decode(), reply[i + 1]) for i in range(1, len(reply), 2)]
    return LimitsPage(names=names, cursor=int(reply[0]))


def _parse_shares_page(reply: list[Any]) -> SharesPage:
    tenants = [_shares_row(reply[i].decode(), reply[i + 1]) for i in range(1, len(reply), 2)]
    return SharesPage(tenants=tenants, cursor=int(reply[0]))


def _lost_ids(tasks: Sequence[LeasedTask]) -> Callable[[list[int]], list[str]]:
    """Parses a per-task 1/0 reply to the ids of the tasks whose lease was lost."""

    def lost(reply: list[int]) -> list[str]:
        return [task.task_id for task, ok in zip(tasks, reply, strict=True) if not ok]

    return lost


_PRIORITY_OF = {str(int(priority)).encode(): priority for priority in Priority}


# The fields of one leased task in the reply of queue/pop, in order, and how each is read.
_POP_FIELDS: tuple[tuple[str, Callable[[Any], Any]], ...] = (
    ("task_id", bytes.decode),
    ("user_id", bytes.decode),
    ("priority", _PRIORITY_OF.__getitem__),
    ("name", lambda raw: raw.decode() or None),
    ("payload", decode),
    ("attempts", int),
    ("lease_deadline", lambda raw: raw / MICROS),
    ("lease_token", str),
    ("timeout", float),
    ("max_retries", _max_retries),
    ("created_at", lambda raw: int(raw) / MICROS),
    ("start_time", lambda raw: int(raw) / MICROS),
    ("prev_start_time", seconds),
    ("headers", lambda raw: decode(raw) if raw else {}),
)
# What reading a field written by something other than fairque's checked clients can raise.
_UNREADABLE = (KeyError, ValueError, TypeError, OverflowError, RecursionError)


@dataclass(frozen=True)
class Unreadable:
    """A leased task whose stored record cannot be read: it is failed, not delivered."""

    task_id: str
    lease_token: str
    error: str


class Leased(list[LeasedTask]):
    """The tasks a pop leased, and those it leased but could not read (``unreadable``)."""

    unreadable: list[Unreadable]


def _parse_leased(reply: list[Any]) -> Leased:
    leased = Leased()
    leased.unreadable = []
    try:
        leased.extend([_read_leased(reply, i) for i in range(0, len(reply), _POP_ROW)])
    except _UNREADABLE:  # a record written by something else: read the rows one by one
        rows = [_read_or_name(reply[i : i + _POP_ROW]) for i in range(0, len(reply), _POP_ROW)]
        leased[:] = [row for row in rows if isinstance(row, LeasedTask)]
        leased.unreadable = [row for row in rows if isinstance(row, Unreadable)]
    return leased


def _read_leased(reply: list[Any], i: int) -> LeasedTask:
    # The hot path of every worker: positional arguments, no per-field helpers.
    return LeasedTask(
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
        seconds(reply[i + 12]),  # prev_start_time
        decode(reply[i + 13]) if reply[i + 13] else {},  # headers
    )


def _read_or_name(row: list[Any]) -> LeasedTask | Unreadable:
    try:
        return _read_leased(row, 0)
    except _UNREADABLE:
        return _unreadable(row)


def _unreadable(row: list[Any]) -> Unreadable:
    """Names the first field of ``row`` that cannot be read (the slow path of a pop)."""
    fields = zip(_POP_FIELDS, row, strict=True)
    problems = (_problem(field, read, raw) for (field, read), raw in fields)
    problem = next((found for found in problems if found), "unknown field")
    task_id = row[0].decode(errors="replace")
    return Unreadable(task_id, str(row[7]), f"stored record unreadable: {problem}")


def _problem(field: str, read: Callable[[Any], Any], raw: Any) -> str | None:
    """What is wrong with one field, or None if it reads."""
    try:
        read(raw)
    except _UNREADABLE as exc:
        return f"{field}: {type(exc).__name__}: {exc}"[:200]
    return None


def _task_info(record: Record | None) -> TaskInfo | None:
    return None if record is None else task_info(record)


def task_info(record: Record) -> TaskInfo:
    """The :class:`TaskInfo` of a fair-queue task's record; InvalidInput for another kind,
    or for a record written by something else that cannot be read."""
    if record.kind is not RecordKind.TASK:
        raise record.wrong_reader("task_id")
    try:
        return _task_info_of(record)
    except _UNREADABLE as exc:
        problem = f"{type(exc).__name__}: {exc}"[:200]
        unreadable = f"{record.record_id}: stored record unreadable: {problem}"
        raise InvalidInput("task_id", unreadable) from None


def _task_info_of(record: Record) -> TaskInfo:
    fields = record.fields
    state = record.state
    running = state is TaskState.STARTED
    return TaskInfo(
        task_id=record.record_id,
        user_id=fields["tenant"].decode(),
        priority=Priority(int(fields["priority"])),
        state=state,
        name=text(fields.get("name")),
        payload=decode(fields["payload"]),
        attempts=int(fields.get("attempts", 0)),
        max_retries=_max_retries(fields["max_retries"]),
        timeout=float(fields["timeout"]),
        keep_result=fields.get("keep_result") == b"1",
        created_at=int(fields["created_at"]) / MICROS,
        execute_after=seconds(fields.get("execute_after")),
        start_time=seconds(fields.get("start_time")),
        prev_start_time=seconds(fields.get("prev_start_time")),
        leased_at=seconds(fields.get("leased_at")),
        lease_deadline=seconds(fields.get("lease_deadline")) if running else None,
        lease_token=text(fields.get("lease_token")),
        worker_id=text(fields.get("worker_id")),
        last_error=text(fields.get("last_error")),
        finished_at=seconds(fields.get("finished_at")),
        result=None if record.result is None else decode(record.result),
        has_result=record.result is not None,
        blocked_by=record.blocked_by,
        dependents=record.dependents,
        progress=None if "progress" not in fields else float(fields["progress"]),
        progress_message=text(fields.get("progress_message")),
        progress_at=seconds(fields.get("progress_at")),
        logs=tuple(decode(fields["logs"])) if "logs" in fields else (),
        headers=decode(fields["headers"]) if "headers" in fields else {},
    )


def _parse_page(reply: list[Any]) -> TaskPage:
    tasks = [
        TaskSummary(
            task_id=task_id.decode(),
            user_id=text(tenant),
            name=text(name),
            state=text(state) or "expired",
            priority=int(priority or 0),
            attempts=int(attempts or 0),
            created_at=seconds(created_at),
            worker_id=text(worker_id),
            last_error=None if last_error is None else last_error.decode(errors="replace"),
        )
        for task_id, tenant, name, state, priority, attempts, created_at, worker_id, last_error in (
            flat_rows(reply[1:], 9)
        )
    ]
    return TaskPage(tasks=tasks, cursor=int(reply[0]))


def _pairs(flat: list[bytes]) -> dict[str, int]:
    return {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}


def _parse_workers(reply: list[Any]) -> list[WorkerInfo]:
    workers = []
    for packed in reply[1:]:
        record = decode(packed)
        workers.append(
            WorkerInfo(
                worker_id=record["id"],
                host=record["host"],
                pid=record["pid"],
                functions=tuple(record["functions"]),
                concurrency=record["concurrency"],
                in_flight=record["in_flight"],
                started_at=record["started_at"],
                seen_at=record["seen_at"] / MICROS,
            )
        )
    return sorted(workers, key=lambda worker: worker.worker_id)


def _parse_maintenance(reply: list[int]) -> Maintenance:
    ran, expired, promoted, dropped, orphaned, more = map(int, reply)
    return Maintenance(expired, promoted, dropped, orphaned, bool(ran), bool(more))


def _maintenance_status(flat: list[bytes]) -> MaintenanceStatus:
    fields = {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}
    if not fields:
        return MaintenanceStatus()
    last = Maintenance(
        fields["last_expired"],
        fields["last_promoted"],
        fields["last_dropped"],
        fields["last_orphaned"],
    )
    return MaintenanceStatus(
        fields["last_at"] / MICROS, fields["rounds"], fields.get("dropped", 0), last
    )


def _tenant_rows(rows: list[list[Any]]) -> dict[str, TenantStats]:
    """Stats rows as the scripts send them (include/ready.lua tenant_stat_row), in order:
    tenant, then TenantStats's fields in their order."""
    return {row[0].decode(): TenantStats(*map(int, row[1:])) for row in rows}


def _parse_stats(reply: list[Any]) -> QueueStats:
    states_flat, counters_flat, rows, maintenance_flat, fairness, sums, with_ready = reply
    return QueueStats(
        states={TaskState(name): count for name, count in _pairs(states_flat).items()},
        counters=_pairs(counters_flat),
        tenants=_tenant_rows(rows),
        maintenance=_maintenance_status(maintenance_flat),
        fairness=_fairness_of(STATS_FAIRNESS_MINUTES)(fairness),
        all_tenants=TenantStats(*map(int, sums)),
        tenants_with_ready=int(with_ready),
    )
