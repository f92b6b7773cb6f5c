"""The calls on one task by its id (read, cancel, retry, XCom), the task lists, and the
decisions of waiting for a result (:class:`ResultWait`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fairque.config import MAX_PAYLOAD_BYTES
from fairque.engine import records
from fairque.engine.calls import MAX_PAGE, Call, decode, encode, flat_rows, seconds, text
from fairque.engine.fields import MAX_TIMEOUT_SECONDS, MICROS
from fairque.engine.keys import Namespace
from fairque.engine.records import Record, RecordKind, TaskState, attempt_errors
from fairque.errors import (
    InvalidInput,
    ResultNotKept,
    ResultTimeout,
    TaskFailed,
    TaskNotFound,
)
from fairque.queue.calls.checks import check_name, check_positive
from fairque.queue.calls.leases import UNREADABLE, read_max_retries
from fairque.queue.models import (
    Priority,
    TaskInfo,
    TaskPage,
    TaskSummary,
    task_state,
)


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
        check_name(task_id, "task_id")
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


def get(namespace: Namespace, task_id: str) -> Call[TaskInfo | None]:
    """Reads one task; parses to None when there is no such task."""
    return records.get(namespace, task_id).then(_task_info)


def xcom_push(
    namespace: Namespace, task_id: str, key: str, value: Any, ttl: float | None
) -> Call[None]:
    """Stores ``value`` under ``key`` for task ``task_id``'s dependents."""
    check_name(task_id, "task_id")
    check_name(key, "key")
    if ttl is not None:
        check_positive(ttl, "ttl", 366 * 24 * 3600.0)
    data = encode(value, "value", MAX_PAYLOAD_BYTES)
    args = (key, data, "" if ttl is None else max(1, int(ttl * 1000)))
    return namespace.call("queue/xcom_push", args, lambda _reply: None, params={"task": task_id})


def xcom_pull(namespace: Namespace, task_id: str, key: str, default: Any = None) -> Call[Any]:
    """The value task ``task_id`` stored under ``key``, or ``default``."""
    check_name(task_id, "task_id")
    check_name(key, "key")
    return namespace.call(
        "queue/xcom_pull",
        (key,),
        lambda reply: default if reply is None else decode(reply),
        params={"task": task_id},
    )


def tasks(
    namespace: Namespace,
    state: TaskState | str,
    cursor: int = 0,
    limit: int = 50,
    *,
    user_id: str | None = None,
    name: str | None = None,
) -> Call[TaskPage]:
    """A page of the tasks (and strict jobs) in ``state``, of one tenant and / or
    name if given, from ``cursor``; a page may hold fewer than ``limit``."""
    state = task_state(state)
    for value, field in ((user_id, "user_id"), (name, "name")):
        if value is not None:
            check_name(value, field)
    if isinstance(cursor, bool) or not isinstance(cursor, int) or not 0 <= cursor < 2**53:
        raise InvalidInput("cursor", f"must be an integer from 0 to 2^53, got {cursor!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidInput("limit", f"must be an integer from 1 to {MAX_PAGE}, got {limit!r}")
    args = (state.value, user_id or "", name or "", cursor, limit)
    return namespace.call("namespace/tasks", args, _parse_page)


def _task_info(record: Record | None) -> TaskInfo | None:
    return None if record is None else task_info(record)


def task_info(record: Record) -> TaskInfo:
    """The :class:`TaskInfo` of a fair-queue task's record; InvalidInput for another kind,
    or for a record written by something else that cannot be read."""
    if record.kind is not RecordKind.TASK:
        raise record.wrong_reader("task_id")
    try:
        return _task_info_of(record)
    except UNREADABLE as exc:
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
        max_retries=read_max_retries(fields["max_retries"]),
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
        errors=attempt_errors(fields),
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
