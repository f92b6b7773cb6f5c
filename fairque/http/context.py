"""What a job function run by an HTTP worker can reach: which job it is, and its progress
and log lines, which the worker sends to the master (``POST {master}/jobs/{id}/report``)
and the master keeps with the job (``GET /jobs/{id}``, ``fairque task get``, the Web UI's
job page).

A job function that has a parameter named ``context`` receives a :class:`JobContext`
(async functions) or a :class:`SyncJobContext` (sync functions, which run on threads):
their ``progress`` and ``log`` are a fair task's (:mod:`fairque.runners.fair_worker.context`),
bounded alike.

>>> @task(name="import_rows")
... async def import_rows(rows: int, context: JobContext) -> int:
...     await context.progress(50, f"{rows // 2} of {rows} rows")
...     await context.log("half way")
...     return rows
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import msgspec

from fairque.engine.records import bounded_report
from fairque.errors import FairQueueError, InvalidInput, LeaseLost
from fairque.http.protocol import JobReport, JobRequest, Reported
from fairque.http.wire import ErrorBody


class Reporter:
    """Sends the reports of the jobs a worker runs to its master, with each job's lease
    token, by which the master knows the job is still this worker's."""

    def __init__(self, master: str | None, headers: dict[str, str]) -> None:
        self.master = master.rstrip("/") if master else None
        self.headers = headers
        self.http: httpx.AsyncClient | None = None  # the worker's, while it runs

    async def report(
        self, job: JobRequest, progress: float | None, message: str, lines: Sequence[str]
    ) -> int:
        """Sends a report; returns how many log lines the job's record holds. Raises
        LeaseLost when the master refuses it (the job is no longer this worker's)."""
        # Bounded here as the master bounds it: a flood of lines costs no request body.
        progress, message, kept = bounded_report(progress, message, lines)
        if self.master is None or self.http is None:
            raise FairQueueError("this worker has no master to report to")
        body = msgspec.msgpack.encode(JobReport(job.lease_token, progress, message, kept))
        address = f"{self.master}/jobs/{job.id}/report"
        response = await self.http.post(address, content=body, headers=self.headers)
        if response.status_code == 409:
            raise LeaseLost(job.id)
        if response.status_code == 400:
            error = msgspec.msgpack.decode(response.content, type=ErrorBody)
            raise InvalidInput(error.field or "body", error.message)
        response.raise_for_status()
        return msgspec.msgpack.decode(response.content, type=Reported).lines


@dataclass(frozen=True)
class JobContext:
    """The context of an async job function."""

    job: JobRequest
    reporter: Reporter

    async def progress(self, value: float, message: str = "") -> None:
        """Records how far the job is (any number: a percentage, a count) and a short
        message (200 characters kept)."""
        await self.reporter.report(self.job, value, message, ())

    async def log(self, *lines: str) -> None:
        """Adds log lines to the job's record (the newest 100 kept, 1,000 characters
        each)."""
        await self.reporter.report(self.job, None, "", lines)


@dataclass(frozen=True)
class SyncJobContext:
    """The context of a sync job function, which runs on a thread: its reports are sent
    on the worker's event loop, and each call returns once the master has answered."""

    job: JobRequest
    reporter: Reporter
    loop: asyncio.AbstractEventLoop

    def progress(self, value: float, message: str = "") -> None:
        """Records how far the job is (any number: a percentage, a count) and a short
        message (200 characters kept)."""
        self._wait(self.reporter.report(self.job, value, message, ()))

    def log(self, *lines: str) -> None:
        """Adds log lines to the job's record (the newest 100 kept, 1,000 characters
        each)."""
        self._wait(self.reporter.report(self.job, None, "", lines))

    def _wait(self, sending: Coroutine[Any, Any, int]) -> None:
        asyncio.run_coroutine_threadsafe(sending, self.loop).result()
