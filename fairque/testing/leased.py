"""What a fake context stands on: the leased task a test's run is given, and the queue
it does not have."""

from __future__ import annotations

from typing import Any, NoReturn

import msgspec

from fairque.errors import InvalidInput
from fairque.queue.models import LeasedTask, Priority

DEFAULT_TENANT = "tenant"
DEFAULT_TASK_ID = "test-task"
DEFAULT_TIMEOUT = 300.0


def through_messagepack(value: Any, what: str) -> Any:
    """``value`` as it comes out of the server: through MessagePack, as a task's payload
    and result go (a tuple comes back a list); :class:`InvalidInput` naming ``what`` if
    it cannot be sent."""
    try:
        return msgspec.msgpack.decode(msgspec.msgpack.encode(value))
    except (TypeError, msgspec.EncodeError) as exc:
        raise InvalidInput(what, f"cannot be sent as MessagePack: {exc}") from None


def leased_task(
    name: str | None = None,
    payload: Any = None,
    *,
    user_id: str = DEFAULT_TENANT,
    task_id: str = DEFAULT_TASK_ID,
) -> LeasedTask:
    """A leased task as a worker receives it, on its first attempt (``payload`` through
    MessagePack)."""
    return LeasedTask(
        task_id=task_id,
        user_id=user_id,
        priority=Priority.NORMAL,
        name=name,
        payload=through_messagepack(payload, "payload"),
        attempts=0,
        lease_deadline=0.0,
        lease_token="",
        timeout=DEFAULT_TIMEOUT,
        max_retries=None,
        created_at=0.0,
        start_time=0.0,
        prev_start_time=None,
    )


class NoQueue:
    """The queue of a fake context made without one: any use says how to give one."""

    def __getattr__(self, name: str) -> NoReturn:
        raise InvalidInput(
            "queue",
            f"this fake context has no queue (it used queue.{name}): give it one, "
            "e.g. FakeContext(queue=fairque_queue)",
        )


NO_QUEUE = NoQueue()
