"""Errors raised by fairque. Every one derives from :class:`FairQueueError`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import pydantic
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

M = TypeVar("M", bound=pydantic.BaseModel)


class FairQueueError(Exception):
    """Base class of every error fairque raises."""


class InvalidInput(FairQueueError):  # noqa: N818 - reads as "raise InvalidInput(...)"
    """Input refused before anything was written; ``field`` names what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")

    @classmethod
    def from_errors(cls, errors: Sequence[Mapping[str, Any]]) -> InvalidInput:
        """Builds one error from pydantic's error list, naming every bad field."""
        parts = [(_location(error["loc"]), _message(error)) for error in errors]
        field = parts[0][0] if parts else "input"
        message = "; ".join(f"{name}: {text}" for name, text in parts)
        error = cls(field, message)
        error.args = (message,)
        return error


def validated(handler: pydantic.ModelWrapValidatorHandler[M], data: Any) -> M:
    """Runs a model's validation (in a wrap validator), raising :class:`InvalidInput`
    naming every bad field instead of pydantic's error."""
    try:
        return handler(data)
    except pydantic.ValidationError as exc:
        raise InvalidInput.from_errors(exc.errors()) from None


def _message(error: Mapping[str, Any]) -> str:
    return str(error["msg"]).removeprefix("Value error, ")


def _location(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "input"


class DuplicateTask(FairQueueError):  # noqa: N818
    """A task with this id already exists; nothing of the push was written."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"task_id: a task with id {task_id!r} already exists")


class TaskNotFound(FairQueueError):  # noqa: N818
    """No task with this id (never pushed, or expired after it ended)."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"no task with id {task_id!r}")


class LeaseLost(FairQueueError):  # noqa: N818
    """The caller's lease on the task expired (and the task may have been re-leased)."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"the lease on task {task_id!r} is no longer held by this caller")


class TaskFailed(FairQueueError):  # noqa: N818 - reads as "except TaskFailed"
    """A task waited for (``queue.result``) ended without a result: it failed for good
    (``state`` ``"failed"``) or was canceled (``"canceled"``); ``error`` is its last
    error, or the reason it was canceled."""

    def __init__(self, task_id: str, state: str, error: str | None) -> None:
        self.task_id = task_id
        self.state = state
        self.error = error
        what = "failed" if state == "failed" else f"was {state}"
        super().__init__(f"task {task_id!r} {what}: {error or 'no error recorded'}")


class ResultNotKept(FairQueueError):  # noqa: N818
    """``queue.result`` was asked for a task pushed without ``keep_result=True``: its
    result is never stored, so there is nothing to wait for."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(
            f"task {task_id!r} was pushed without keep_result=True, so its result is not "
            "stored: push it with keep_result=True to wait for its result"
        )


class ResultTimeout(FairQueueError, TimeoutError):  # noqa: N818
    """``queue.result`` waited ``timeout`` seconds and the task had not ended (it may
    still end later: wait again, or cancel it)."""

    def __init__(self, task_id: str, timeout: float, state: str) -> None:
        self.task_id = task_id
        self.timeout = timeout
        self.state = state
        super().__init__(f"task {task_id!r} had not ended after {timeout:g} s (it is {state})")


class ScheduleError(FairQueueError):
    """An operation on schedule ``schedule_id`` was refused; nothing was written."""

    def __init__(self, schedule_id: str, message: str) -> None:
        self.schedule_id = schedule_id
        super().__init__(message)


class ScheduleNotFound(ScheduleError):  # noqa: N818
    """No schedule with this id."""

    def __init__(self, schedule_id: str) -> None:
        super().__init__(schedule_id, f"no schedule with id {schedule_id!r}")


class DuplicateSchedule(ScheduleError):  # noqa: N818
    """A schedule with this id already exists."""

    def __init__(self, schedule_id: str) -> None:
        message = f"schedule_id: a schedule with id {schedule_id!r} already exists"
        super().__init__(schedule_id, message)


class ScheduleChanged(ScheduleError):  # noqa: N818
    """The schedule was changed by someone else between reading and updating it."""

    def __init__(self, schedule_id: str) -> None:
        message = f"schedule {schedule_id!r} changed meanwhile; read it and try again"
        super().__init__(schedule_id, message)


class ServerUnavailable(FairQueueError, RedisConnectionError):  # noqa: N818
    """The server did not answer: down, unreachable, or failing over. The call may be
    tried again (a worker does so by itself). It is also a redis-py ``ConnectionError``,
    so code written to catch those catches it."""

    def __init__(self, address: str, cause: BaseException, failing_over: bool = False) -> None:
        self.address = address
        detail = " ".join(str(cause).split()) or type(cause).__name__
        if failing_over:  # it answered: a replica, or a cluster's slots on the move
            super().__init__(f"the server at {address} is failing over ({detail})")
        else:
            super().__init__(f"cannot reach the server at {address} ({detail})")


class ServerTimeout(ServerUnavailable, RedisTimeoutError):  # noqa: N818
    """The server did not answer a call within the client's ``socket_timeout``. Whether
    the call ran is unknown: a push sent again with the same ``task_id`` is refused as a
    duplicate rather than run twice."""

    def __init__(self, address: str, cause: BaseException, seconds: float | None) -> None:
        super().__init__(address, cause)
        within = f"within {seconds:g} s" if seconds else "in time"
        self.args = (
            f"the server at {address} did not answer {within} ({cause}); if it is only "
            "busy, give more time in the URL (?socket_timeout=SECONDS)",
        )


class EmbeddedServerError(FairQueueError):
    """The embedded Valkey server could not be started or reached."""


def from_script_error(message: str) -> FairQueueError:
    """Maps an error reply of a fairque script to the matching exception."""
    code, _, detail = message.partition(" ")
    if code == "DUPLICATE":
        return DuplicateTask(detail)
    if code == "NOT_FOUND":
        return TaskNotFound(detail)
    if code == "LEASE_LOST":
        return LeaseLost(detail)
    if code == "SCHEDULE_NOT_FOUND":
        return ScheduleNotFound(detail)
    if code == "DUPLICATE_SCHEDULE":
        return DuplicateSchedule(detail)
    if code == "SCHEDULE_CHANGED":
        return ScheduleChanged(detail)
    if code == "UNKNOWN_DEPENDENCY":
        return InvalidInput("depends_on", f"no task with id {', '.join(detail.split())}")
    if code == "CANCELED_DEPENDENCY":
        return InvalidInput("depends_on", f"task {detail} was canceled, so this could never run")
    if code == "NEWER_FORMAT":
        prefix, recorded, known = detail.split(" ")
        namespace = prefix[len("fq:{") : -len("}:")]  # the key prefix fq:{name}:
        return NewerDataFormat(namespace, int(recorded), int(known))
    if code == "INVALID":
        field, _, text = detail.partition(" ")
        return InvalidInput(field, f"refused by the server: {text!r}")
    return FairQueueError(f"script error: {message}")


class NewerDataFormat(FairQueueError):  # noqa: N818
    """The namespace holds data of a format newer than this release reads: it was written
    by a newer fairque. Nothing was written; upgrade fairque on this host."""

    def __init__(self, namespace: str, recorded: int, known: int) -> None:
        self.namespace, self.recorded, self.known = namespace, recorded, known
        super().__init__(
            f"namespace {namespace} holds data format {recorded}, newer than this fairque "
            f"reads (format {known}): upgrade fairque here before it uses the namespace"
        )


class NotReplicated(FairQueueError):  # noqa: N818
    """A write was applied on the master but fewer replicas than asked confirmed it in
    time, so a failover now could lose it. ``task_ids`` names what was pushed."""

    def __init__(self, task_ids: list[str], acknowledged: int, wanted: int) -> None:
        self.task_ids = task_ids
        self.acknowledged = acknowledged
        self.wanted = wanted
        super().__init__(
            f"replicas: {acknowledged} of {wanted} replica(s) confirmed the push in time"
        )
