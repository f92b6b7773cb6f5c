"""The storage's data types, and the checks both storages apply to what they are given."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from fairque.engine.records import check_delay, check_moment
from fairque.errors import InvalidInput

MAX_QUEUE_NUM = 2**31 - 1
MAX_COUNT = 10_000  # tasks per get_task, ids per done_task, retries per retry_task
DEFAULT_VISIBILITY_TIMEOUT = 60.0  # seconds
MAX_VISIBILITY_TIMEOUT = 7 * 24 * 3600.0
MAX_DATA_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class StorageTask:
    """A task taken from a numbered queue."""

    id: int
    queue_num: int
    data: bytes
    attempts: int  # times it went back to the queue (0 = first attempt)
    created_at: datetime
    start_time: datetime  # when this attempt became available
    prev_start_time: datetime | None  # when the previous one did (None on the first)


@dataclass(frozen=True, slots=True)
class RetryInfo:
    """Put a taken task back, available again at ``next_start_time``."""

    task_id: int
    next_start_time: datetime

    @classmethod
    def after(cls, task_id: int, seconds: float) -> RetryInfo:
        """Available again ``seconds`` from now (the caller's clock)."""
        return cls(task_id, datetime.now(timezone.utc) + timedelta(seconds=seconds))


@dataclass(frozen=True, slots=True)
class PutTaskRequest:
    """A new task for queue ``queue_num``: available now, at ``start_time``, or after
    ``delay`` (give at most one of the two)."""

    queue_num: int
    data: bytes
    start_time: datetime | None = None
    delay: timedelta | float | None = None  # seconds, or a timedelta


@dataclass(frozen=True, slots=True)
class QueueStat:
    """Tasks of one queue now: total = ready + taken + delayed."""

    queue_num: int
    total: int = 0
    ready: int = 0  # may be taken now
    taken: int = 0  # taken, neither done nor retried, visibility timeout not over
    delayed: int = 0  # waiting for their start time


@dataclass(frozen=True, slots=True)
class Stats:
    """Per-queue figures for every queue that holds tasks."""

    queues: dict[int, QueueStat] = field(default_factory=dict)

    def of(self, queue_num: int) -> QueueStat:
        """The figures of ``queue_num`` (all zero when it holds no task)."""
        return self.queues.get(queue_num) or QueueStat(queue_num)


def _int(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(name, f"must be an integer from {low} to {high}, got {value!r}")
    return value


def check_queue_num(value: object) -> int:
    return _int(value, "queue_num", 0, MAX_QUEUE_NUM)


def check_count(value: object) -> int:
    return _int(value, "count", 1, MAX_COUNT)


def check_visibility(seconds: float | None, default: float = DEFAULT_VISIBILITY_TIMEOUT) -> float:
    """The visibility timeout to use: ``seconds``, or ``default`` when None."""
    if seconds is None:
        return default
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise InvalidInput("visibility_timeout", f"must be a number of seconds, got {seconds!r}")
    if not 0 < seconds <= MAX_VISIBILITY_TIMEOUT:
        raise InvalidInput(
            "visibility_timeout",
            f"must be above 0 and at most {MAX_VISIBILITY_TIMEOUT:g} s, got {seconds!r}",
        )
    return float(seconds)


def check_ids(task_ids: Sequence[int]) -> list[int]:
    if isinstance(task_ids, (str, bytes)) or not isinstance(task_ids, Sequence):
        raise InvalidInput("task_ids", f"must be a list of task ids, got {task_ids!r}")
    if len(task_ids) > MAX_COUNT:
        raise InvalidInput("task_ids", f"at most {MAX_COUNT} ids per call, got {len(task_ids)}")
    return [_int(task_id, "task_ids", 1, 2**63 - 1) for task_id in task_ids]


def _aware(value: object, name: str) -> datetime:
    if not isinstance(value, datetime):
        raise InvalidInput(name, f"must be a datetime, got {value!r}")
    try:
        return check_moment(value)
    except ValueError as exc:
        raise InvalidInput(name, str(exc)) from None


def check_retries(retries: Sequence[RetryInfo]) -> list[tuple[int, datetime]]:
    """``retries`` as (task id, next start time) pairs."""
    if not isinstance(retries, Sequence):
        raise InvalidInput("retries", f"must be a list of RetryInfo, got {retries!r}")
    if len(retries) > MAX_COUNT:
        raise InvalidInput("retries", f"at most {MAX_COUNT} per call, got {len(retries)}")
    checked = []
    for retry in retries:
        if not isinstance(retry, RetryInfo):
            raise InvalidInput("retries", f"expected RetryInfo, got {type(retry).__name__}")
        checked.append(
            (
                _int(retry.task_id, "task_id", 1, 2**63 - 1),
                _aware(retry.next_start_time, "next_start_time"),
            )
        )
    return checked


def check_request(request: PutTaskRequest) -> tuple[datetime | None, timedelta | None]:
    """The request's (start_time, delay), at most one of them set, once checked."""
    if not isinstance(request, PutTaskRequest):
        raise InvalidInput("request", f"expected PutTaskRequest, got {type(request).__name__}")
    check_queue_num(request.queue_num)
    if not isinstance(request.data, bytes):
        raise InvalidInput("data", f"must be bytes, got {type(request.data).__name__}")
    if len(request.data) > MAX_DATA_BYTES:
        raise InvalidInput("data", f"is {len(request.data)} bytes, over {MAX_DATA_BYTES}")
    if request.start_time is not None and request.delay is not None:
        raise InvalidInput("delay", "give start_time or delay, not both")
    start = None if request.start_time is None else _aware(request.start_time, "start_time")
    delay = request.delay
    if delay is None:
        return start, None
    if isinstance(delay, timedelta):
        seconds: object = delay.total_seconds()
    else:
        seconds = delay
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise InvalidInput("delay", f"must be seconds or a timedelta, got {delay!r}")
    try:
        return None, timedelta(seconds=check_delay(seconds))
    except ValueError as exc:
        raise InvalidInput("delay", str(exc)) from None


def check_requests(
    requests: Sequence[PutTaskRequest],
) -> list[tuple[datetime | None, timedelta | None]]:
    if isinstance(requests, PutTaskRequest) or not isinstance(requests, Sequence):
        raise InvalidInput("requests", "must be a list of PutTaskRequest")
    if not 1 <= len(requests) <= MAX_COUNT:
        raise InvalidInput("requests", f"must hold 1 to {MAX_COUNT} requests, got {len(requests)}")
    return [check_request(request) for request in requests]
