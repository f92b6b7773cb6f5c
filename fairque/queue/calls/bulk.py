"""Bulk operations on the fair queue's tasks, by state, tenant, task name and age: the
call of one batch (``queue/bulk``), which looks at a bounded slice of where the state's
tasks are kept, and the cursor that carries an operation from batch to batch.

An operation goes through passes, one per state it covers on each shard it visits
(:meth:`fairque.queue.plans.QueuePlans.bulk`); its cursor says which pass, where in it,
and when the operation began on the server's clock (``as_of``): tasks that ended or were
pushed after that are left alone, so an operation always ends, and a task it retried
that fails again meanwhile is not retried twice. Stopped between batches, an operation
can be run again from the start: what it did is done, and it does the rest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from fairque.engine.calls import Call
from fairque.engine.fields import MICROS
from fairque.engine.keys import Namespace
from fairque.engine.records import TaskState
from fairque.errors import InvalidInput
from fairque.queue.models import BulkAction, BulkBatch, Selector, member_of

BULK_BATCH = 200  # entries a batch looks at, by default: a retry of 200 holds the server ~3 ms
MAX_BULK_BATCH = 1_000  # and at most (~15 ms)
# The states each action takes, in the order an operation goes through them.
BULK_STATES: dict[BulkAction, tuple[TaskState, ...]] = {
    BulkAction.RETRY: (TaskState.FAILED,),
    BulkAction.CANCEL: (TaskState.SCHEDULED, TaskState.DEFERRED, TaskState.QUEUED),
    BulkAction.DELETE: (TaskState.FINISHED, TaskState.FAILED, TaskState.CANCELED),
}


def action_of(action: BulkAction | str) -> BulkAction:
    """``action`` as a :class:`BulkAction`; InvalidInput naming the choices otherwise."""
    return member_of(BulkAction, action, "action")


def states_of(action: BulkAction, selector: Selector) -> tuple[TaskState, ...]:
    """The states an operation goes through; InvalidInput if the action does not take the
    selector's state. Queued tasks are kept per tenant: an operation walks them for a
    tenant it names only (queued, and no tenant: InvalidInput)."""
    takes = BULK_STATES[action]
    if selector.state is not None:
        if selector.state not in takes:
            named = ", ".join(state.value for state in takes)
            raise InvalidInput(
                "state", f"{action.value} takes tasks that are {named}; got {selector.state.value}"
            )
        takes = (selector.state,)
    if selector.user_id is None:
        if selector.state is TaskState.QUEUED:
            raise InvalidInput("user_id", "queued tasks are canceled one tenant at a time")
        takes = tuple(state for state in takes if state is not TaskState.QUEUED)
    return takes


def check_batch(size: int) -> None:
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_BULK_BATCH:
        raise InvalidInput("batch", f"must be an integer from 1 to {MAX_BULK_BATCH}, got {size!r}")


# '' or pass.position.as_of; a position is a set scan's cursor (< 2^64) or an offset.
CURSOR_PATTERN = r"^(\d{1,5}\.\d{1,19}\.\d{1,17})?$"
_CURSOR = re.compile(CURSOR_PATTERN)


def read_cursor(cursor: str) -> tuple[int, int, int]:
    """(pass, position in it, as_of) of a cursor ('': the first batch); InvalidInput for
    one that is not a cursor. A pass beyond the operation's last is its end."""
    found = _CURSOR.fullmatch(cursor) if isinstance(cursor, str) else None
    if found is None:
        raise InvalidInput("cursor", f"not a cursor a batch returned: {cursor!r}")
    if cursor == "":
        return 0, 0, 0
    at, position, as_of = cursor.split(".")
    return int(at), int(position), int(as_of)


def batch(
    namespace: Namespace,
    action: BulkAction,
    selector: Selector,
    state: TaskState,
    *,
    position: int,
    as_of: int,
    size: int,
    dry_run: bool,
) -> Call[tuple[bool, int, int, int, int, int]]:
    """One batch on ``namespace`` of the tasks in ``state`` from ``position``; parses to
    (the state is done, next position, as_of, entries looked at, tasks selected, entries
    in the state)."""
    args = (
        "count" if dry_run else action.value,
        state.value,
        selector.user_id or "",
        selector.name or "",
        int(selector.older_than * MICROS),
        as_of,
        position,
        size,
    )
    return namespace.call("queue/bulk", args, _parse_batch)


def _parse_batch(reply: Sequence[Any]) -> tuple[bool, int, int, int, int, int]:
    done, position, as_of, looked, selected, total = (int(value) for value in reply)
    return done == 1, position, as_of, looked, selected, total


def next_batch(
    at: int, passes: int, state: TaskState, reply: tuple[bool, int, int, int, int, int]
) -> BulkBatch:
    """What a batch of pass ``at`` (of ``passes``) did, with the cursor of the next."""
    done, position, as_of, looked, selected, total = reply
    if done:
        at, position = at + 1, 0
    cursor = f"{at}.{position}.{as_of}" if at < passes else None
    return BulkBatch(cursor, looked, selected, state, total)
