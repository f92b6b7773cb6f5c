"""The storage's requests, checked once: :class:`Requests`, in front of every backend.

Each storage (Redis, Tarantool, in memory) hands a request's arguments to one method
here before anything else and works on what it returns: numbers in range, times aware,
payloads bytes within their bound, a plan of known queue numbers. What a request must
be is written once, so the backends cannot disagree about it, and a bad request changes
nothing in any of them (the conformance suite holds them to the same refusals).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from fairque.storage.models import (
    PutTaskRequest,
    RetryInfo,
    check_count,
    check_ids,
    check_queue_num,
    check_requests,
    check_retries,
    check_visibility,
)
from fairque.storage.plan import WorkerReport, check_plan, check_report, check_ttl


@dataclass(frozen=True)
class Take:
    """``get_task``: up to ``count`` tasks of ``queue_num``, hidden for ``visibility`` s."""

    queue_num: int
    count: int
    visibility: float


@dataclass(frozen=True)
class Put:
    """One task of ``put_tasks``: at ``start_time``, after ``delay``, or now (both None)."""

    queue_num: int
    data: bytes
    start_time: datetime | None
    delay: timedelta | None


@dataclass(frozen=True)
class Beat:
    """A worker's heartbeat: its report, kept for ``ttl`` seconds."""

    report: WorkerReport
    ttl: float


class Requests:
    """Checks each request of one storage (whose default visibility timeout is
    ``visibility_timeout``); raises :class:`~fairque.errors.InvalidInput` naming the
    field."""

    def __init__(self, visibility_timeout: float | None = None) -> None:
        self.visibility_timeout = check_visibility(visibility_timeout)

    def take(self, queue_num: int, count: int, visibility_timeout: float | None) -> Take:
        return Take(
            check_queue_num(queue_num),
            check_count(count),
            check_visibility(visibility_timeout, self.visibility_timeout),
        )

    def done(self, task_ids: Sequence[int]) -> list[int]:
        return check_ids(task_ids)

    def retries(self, retries: Sequence[RetryInfo]) -> list[tuple[int, datetime]]:
        return check_retries(retries)

    def puts(self, requests: Sequence[PutTaskRequest]) -> list[Put]:
        starts = check_requests(requests)
        return [
            Put(request.queue_num, request.data, start_time, delay)
            for request, (start_time, delay) in zip(requests, starts, strict=True)
        ]

    def beat(self, report: WorkerReport, ttl: float) -> Beat:
        return Beat(check_report(report), check_ttl(ttl))

    def plan(self, plan: Mapping[str, Sequence[int]]) -> dict[str, list[int]]:
        return check_plan(plan)
