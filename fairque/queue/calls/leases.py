"""The calls of a leased task's life: pop (the fair policy, ``queue/pop.lua``), finish,
release, fail, extend, report and hand over; and the reader of a pop's rows, which fails
a task whose stored record cannot be read instead of delivering it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fairque.config import MAX_PAYLOAD_BYTES
from fairque.engine import records
from fairque.engine.calls import (
    MAX_POP,
    Arg,
    Call,
    Wait,
    decode,
    default_worker_id,
    encode,
    flat_rows,
    pack,
    seconds,
)
from fairque.engine.fields import FINISH_ROW, LEASED_ROW, MAX_TIMEOUT_SECONDS, MICROS
from fairque.engine.keys import Namespace
from fairque.engine.records import ErrorReport, TaskState, check_identifier, error_report
from fairque.errors import (
    InvalidInput,
    LeaseLost,
)
from fairque.queue.calls.checks import check_positive
from fairque.queue.models import (
    LeasedTask,
    Priority,
)

MAX_TENANTS_PER_POP = 1_000


MAX_NAMES_PER_POP = 1_000


MAX_POP_WAIT = 3_600.0  # seconds a pop may wait for work


MIN_POP_WAIT = 0.001  # BLPOP's resolution: a shorter wait would be read as "for ever"


HAND_OVER_DELAY = 1.0  # seconds before a task handed over is offered again


UNSERVED_GRACE = 60.0  # seconds a task may wait for a live worker that serves its function


def read_max_retries(raw: bytes | str) -> int | None:
    value = int(raw)
    return None if value < 0 else value


def checked_names(values: Sequence[str] | None) -> list[str]:
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


def pop(
    namespace: Namespace,
    count: int = 1,
    *,
    assigned_users: Sequence[str] | None = None,
    steal_targets: Sequence[str] | None = None,
    worker_id: str | None = None,
    lease_seconds: float | None = None,
    wait: float | None = None,
    names: Sequence[str] | None = None,
) -> Call[Leased]:
    """Leases up to ``count`` tasks by the fair policy (see :class:`Leased`): of the
    task ``names`` given, then of names no live worker serves (to hand over: see
    ``queue/pop.lua``), or of any name when none are given. With ``wait``, once a
    tenant may be served or ``wait`` seconds have passed (the wake-up tokens of the
    names' lanes, see ``include/ready.lua``)."""
    served = checked_names(names)
    args = pop_args(count, assigned_users, steal_targets, worker_id, lease_seconds, served=served)
    if wait is not None:
        check_positive(wait, "wait", MAX_POP_WAIT)
    call = namespace.call("queue/pop", args, parse_leased)
    return call if wait is None else call.after(wait_for_work(namespace, served, wait))


def wait_for_work(namespace: Namespace, served: Sequence[str], wait: float) -> Wait:
    """A wait of up to ``wait`` seconds for a wake-up token of the lanes of the task names
    ``served`` (none: any lane's), which a pop sent behind it follows at once."""
    tokens = tuple(namespace.lane_key(name, "wakeups") for name in served)
    return Wait(tokens or (namespace.key("wakeups:any"),), max(wait, MIN_POP_WAIT))


def pop_args(
    count: int,
    assigned_users: Sequence[str] | None,
    steal_targets: Sequence[str] | None,
    worker_id: str | None,
    lease_seconds: float | None,
    *,
    served: list[str],
) -> list[Arg]:
    """A pop's arguments (``queue/pop.lua``'s ARGV[2..]), checked; ``served`` are the
    task names it serves (:func:`checked_names`)."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_POP:
        raise InvalidInput("count", f"must be an integer from 1 to {MAX_POP}, got {count!r}")
    if lease_seconds is not None:
        check_positive(lease_seconds, "lease_seconds", MAX_TIMEOUT_SECONDS)
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


def finish(
    namespace: Namespace, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None
) -> Call[list[str]]:
    """Acknowledges ``tasks`` (with ``results``, one per task, if given); the reply
    parses to the ids whose lease was lost."""
    rows, kept = _finish_args(tasks, results)
    return namespace.call("queue/finish", (len(tasks), rows, *kept), _lost_ids(tasks))


def finish_and_pop(
    namespace: Namespace,
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
    """:func:`finish` then :func:`pop` (which does not wait) in one atomic call
    (``queue/finish_pop.lua``): the reply parses to the ids whose lease was lost and
    the tasks leased."""
    rows, kept = _finish_args(tasks, results)
    popping = pop_args(
        count, assigned_users, steal_targets, worker_id, lease_seconds, served=checked_names(names)
    )
    args = (len(tasks), rows, len(kept), *kept, *popping)
    lost_of = _lost_ids(tasks)
    finished = len(tasks)

    def parse(reply: list[Any]) -> tuple[list[str], Leased]:
        return lost_of(reply[:finished]), parse_leased(reply[finished:])

    return namespace.call("queue/finish_pop", args, parse)


def _finish_args(
    tasks: Sequence[LeasedTask], results: Sequence[Any] | None
) -> tuple[bytes, list[Arg]]:
    """A finish's rows (FINISH_ROW: id, lease token, result slot), packed, and the results kept
    (each serialised, checked against the size limit), which the slots number from 1."""
    if results is None:
        results = [None] * len(tasks)
    if len(results) != len(tasks):
        raise InvalidInput("results", "must have one result per task")
    rows: list[str | int] = []  # FINISH_ROW's, one after the other
    kept: list[Arg] = []
    limit = MAX_PAYLOAD_BYTES
    for task, result in zip(tasks, results, strict=True):
        if result is not None:
            kept.append(encode(result, "result", limit))
        slot = 0 if result is None else len(kept)
        rows += FINISH_ROW.pack(
            task_id=task.task_id, lease_token=task.lease_token, result_slot=slot
        )
    return pack(rows), kept


def finish_one(namespace: Namespace, task: LeasedTask, result: Any) -> Call[None]:
    """Acknowledges one task; parsing raises :class:`LeaseLost` if its lease was lost."""

    def check(lost: list[str]) -> None:
        if lost:
            raise LeaseLost(task.task_id)

    return finish(namespace, [task], [result]).then(check)


def release(namespace: Namespace, tasks: Sequence[LeasedTask]) -> Call[list[str]]:
    """Hands leased tasks back to the queue; parses to the ids whose lease was lost."""
    rows = [value for task in tasks for value in (task.task_id, task.lease_token)]
    return namespace.call("queue/release", (len(tasks), pack(rows)), _lost_ids(tasks))


def fail(
    namespace: Namespace,
    task: LeasedTask | Unreadable,
    error: str | BaseException | ErrorReport,
    retry: bool,
) -> Call[TaskState]:
    """Ends an attempt as failed with ``error`` (a text, or an exception whose type and
    traceback the task keeps too: records.error_report); the reply parses to the task's
    new state."""
    report = error_report(error)
    args = (
        task.task_id, task.lease_token, report.message, int(retry), report.type, report.traceback
    )  # fmt: skip
    return namespace.call("queue/fail", args, lambda reply: TaskState(reply.decode()))


def fail_unreadable(namespace: Namespace, task: Unreadable) -> Call[TaskState]:
    """Fails, for good, a task a pop leased but could not read (its error names the
    field): it never reaches a worker, and the rest of its batch is delivered."""
    return fail(namespace, task, task.error, retry=False)


def extend(namespace: Namespace, task: LeasedTask, seconds: float) -> Call[float]:
    """Moves the lease deadline to now + ``seconds``; parses to the new deadline."""
    check_positive(seconds, "seconds", MAX_TIMEOUT_SECONDS)
    args = (task.task_id, task.lease_token, repr(seconds))

    def record(reply: int) -> float:
        task.lease_deadline = int(reply) / MICROS
        return task.lease_deadline

    return namespace.call("queue/extend", args, record)


def report(
    namespace: Namespace,
    task: LeasedTask,
    progress: float | None = None,
    message: str = "",
    lines: Sequence[str] = (),
) -> Call[int]:
    """Records a running task's progress (any finite number, with a message) and log
    lines (bounded: records.report); parses to the lines the record holds. Raises
    LeaseLost if the caller no longer holds the task."""
    return records.report(
        namespace,
        task.task_id,
        task.lease_token,
        progress=progress,
        message=message,
        lines=lines,
    )


def hand_over(
    namespace: Namespace, tasks: Sequence[LeasedTask], delay: float, grace: float
) -> Call[list[str]]:
    """Gives back tasks whose function this worker lacks (no attempt counted), due again
    after ``delay`` s for a worker that has it; one that no live worker has served for
    ``grace`` s fails. Parses to the ids whose lease was lost."""
    check_positive(delay, "delay", 3600.0)
    check_positive(grace, "grace", 7 * 24 * 3600.0)
    rows = [value for task in tasks for value in (task.task_id, task.lease_token)]
    args = (len(tasks), pack(rows), int(delay * MICROS), int(grace * MICROS))
    return namespace.call("queue/hand_over", args, _lost_ids(tasks))


def _lost_ids(tasks: Sequence[LeasedTask]) -> Callable[[list[int]], list[str]]:
    """Parses a per-task 1/0 reply to the ids of the tasks whose lease was lost."""

    def lost(reply: list[int]) -> list[str]:
        return [task.task_id for task, ok in zip(tasks, reply, strict=True) if not ok]

    return lost


_PRIORITY_OF = {str(int(priority)).encode(): priority for priority in Priority}


# How each field of a leased task's row (LEASED_ROW: queue/pop's reply) is read; LeasedTask
# takes them in the row's order.
_READERS: dict[str, Callable[[Any], Any]] = {
    "task_id": bytes.decode,
    "user_id": bytes.decode,
    "priority": _PRIORITY_OF.__getitem__,
    "name": lambda raw: raw.decode() or None,
    "payload": decode,
    "attempts": int,
    "lease_deadline": lambda raw: raw / MICROS,
    "lease_token": str,
    "timeout": float,
    "max_retries": read_max_retries,
    "created_at": lambda raw: int(raw) / MICROS,
    "start_time": lambda raw: int(raw) / MICROS,
    "prev_start_time": seconds,
    "headers": lambda raw: decode(raw) if raw else {},
}
_POP_FIELDS = tuple((name, _READERS[name]) for name in LEASED_ROW.fields)
_POP_READERS = tuple(_READERS[name] for name in LEASED_ROW.fields)


# What reading a field written by something other than fairque's checked clients can raise.
UNREADABLE = (KeyError, ValueError, TypeError, OverflowError, RecursionError)


@dataclass(frozen=True)
class Unreadable:
    """A leased task whose stored record cannot be read: it is failed, not delivered."""

    task_id: str
    lease_token: str
    error: str


class Leased(list[LeasedTask]):
    """The tasks a pop leased, and those it leased but could not read (``unreadable``)."""

    unreadable: list[Unreadable]


def parse_leased(reply: list[Any]) -> Leased:
    """A pop's rows (``queue/pop.lua``), as leased tasks."""
    leased = Leased()
    leased.unreadable = []
    try:
        leased.extend([_read_leased(row) for row in flat_rows(reply, LEASED_ROW.width)])
    except UNREADABLE:  # a record written by something else: read the rows one by one
        rows = [_read_or_name(row) for row in flat_rows(reply, LEASED_ROW.width)]
        leased[:] = [row for row in rows if isinstance(row, LeasedTask)]
        leased.unreadable = [row for row in rows if isinstance(row, Unreadable)]
    return leased


def _read_leased(row: Sequence[Any]) -> LeasedTask:
    return LeasedTask(*[read(raw) for read, raw in zip(_POP_READERS, row, strict=True)])


def _read_or_name(row: Sequence[Any]) -> LeasedTask | Unreadable:
    try:
        return _read_leased(row)
    except UNREADABLE:
        return _unreadable(row)


def _unreadable(row: Sequence[Any]) -> Unreadable:
    """Names the first field of ``row`` that cannot be read (the slow path of a pop)."""
    fields = zip(_POP_FIELDS, row, strict=True)
    problems = (_problem(field, read, raw) for (field, read), raw in fields)
    problem = next((found for found in problems if found), "unknown field")
    task_id = row[0].decode(errors="replace")
    token = str(row[LEASED_ROW.offset("lease_token")])
    return Unreadable(task_id, token, f"stored record unreadable: {problem}")


def _problem(field: str, read: Callable[[Any], Any], raw: Any) -> str | None:
    """What is wrong with one field, or None if it reads."""
    try:
        read(raw)
    except UNREADABLE as exc:
        return f"{field}: {type(exc).__name__}: {exc}"[:200]
    return None
