"""The calls that push tasks: one task's row of the push script's arguments
(:class:`PushRow`), in the order its dependencies need, sent one task or a batch per call
(``queue/push.lua``)."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from fairque.config import MAX_PAYLOAD_BYTES
from fairque.engine.calls import MAX_BATCH, Arg, Call, encode, new_ids, pack
from fairque.engine.fields import MICROS, PUSH_ROW
from fairque.engine.keys import Namespace
from fairque.errors import (
    InvalidInput,
)
from fairque.queue.models import (
    Task,
    check_headers,
)


@dataclass(frozen=True, slots=True)
class PushRow:
    """One task ready to be pushed (:func:`push_row`): its id, its row of the
    push script's arguments (flat: the rows of a push are sent one after the other, see
    ``queue/push.lua``), its payload bytes and the ids it depends on."""

    task_id: str
    row: tuple[Any, ...]
    payload: bytes
    depends_on: tuple[str, ...]


def _retries_arg(task: Task) -> int:
    """The max_retries field of push: -1 for no limit."""
    return -1 if task.max_retries is None else task.max_retries


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


def tenant_of(task: Task) -> str:
    """The tenant of a task to push (its shard's key); refuses what is not a :class:`Task`."""
    if not isinstance(task, Task):
        raise InvalidInput("tasks", f"expected Task, got {type(task).__name__}")
    return task.user_id


def push(
    namespace: Namespace,
    tasks: Sequence[Task],
    *,
    replicas: int = 0,
    replica_timeout: float = 1.0,
) -> Call[list[str]]:
    """Stores ``tasks`` atomically; the reply parses to their ids, in order (once
    ``replicas`` replicas have them, see :meth:`~fairque.engine.calls.Call.replicated`)."""
    if not tasks:
        raise InvalidInput("tasks", "must not be empty")
    if len(tasks) > MAX_BATCH:
        raise InvalidInput("tasks", f"at most {MAX_BATCH} tasks per push, got {len(tasks)}")
    for task in tasks:
        if not isinstance(task, Task):
            raise InvalidInput("tasks", f"expected Task, got {type(task).__name__}")
    fresh = new_ids(len(tasks))
    rows = [push_row(task, id_) for task, id_ in zip(tasks, fresh, strict=True)]
    return push_rows(namespace, rows).replicated(replicas, replica_timeout)


def push_one(namespace: Namespace, task: Task) -> Call[str]:
    """Stores one task; the reply parses to its id."""
    row = push_row(task)
    task_id = row.task_id
    args = (1, pack(row.row), row.payload)
    return namespace.call("queue/push", args, lambda _reply: task_id)


def push_row(task: Task, fresh_id: str | None = None) -> PushRow:
    """One task made ready to push: refuses what is not a :class:`Task` or a payload
    that cannot be serialised or is too big, before anything is sent. Its id is the
    task's own, else ``fresh_id``, else a new one."""
    if not isinstance(task, Task):
        raise InvalidInput("tasks", f"expected Task, got {type(task).__name__}")
    task_id = task.task_id or fresh_id or new_ids(1)[0]
    # The namespace's own limit (its settings, in the server) is checked by the script.
    payload = encode(task.payload, "payload", MAX_PAYLOAD_BYTES)
    given = task.model_fields_set  # the others take the name's defaults, if it has them
    row = PUSH_ROW.pack(
        task_id=task_id,
        tenant=task.user_id,
        priority=int(task.priority) if "priority" in given else "",
        name=task.name or "",
        max_retries=_retries_arg(task) if "max_retries" in given else "",
        timeout=task.timeout if "timeout" in given else "",
        keep_result=int(task.keep_result),
        start=_start_arg(task),
        headers=_headers_arg(task),
        dependencies=len(task.depends_on),
    )
    return PushRow(task_id, row + task.depends_on, payload, task.depends_on)


def push_rows(namespace: Namespace, rows: Sequence[PushRow]) -> Call[list[str]]:
    """Stores the tasks of ``rows`` (see :func:`push_row`) atomically; the reply
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
    return namespace.call("queue/push", args, lambda _reply: ids)
