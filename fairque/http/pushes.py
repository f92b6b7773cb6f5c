"""The master's single pushes, sent together: the jobs of ``POST /jobs`` requests that
arrive while a push is on its way to the server go in the next script call, as one batch.

A lone request is sent at once (no waiting for company); under load, each call carries
what arrived during the previous one. One call of n jobs costs the server and the
master far less than n calls (the script's fixed cost, redis-py's packing and the round
trip are paid once), which is most of what a single push cost.

Each request keeps its own outcome. The push script stores a batch all or none, so a
batch that is refused for one job's sake (a payload over the namespace's limit) is sent
again one job per call: the others are stored, and the refused one gets the error it
would have had alone. An error that is no job's fault (the server is away) is every
request's error, as it would have been had each been sent alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from fairque.engine.calls import MAX_BATCH
from fairque.errors import FairQueueError
from fairque.jobs import Job
from fairque.jobs.client import AsyncJobQueue

BATCH = min(100, MAX_BATCH)  # jobs per call at most: bounds one script's run on the server


class Pushes:
    """Pushes jobs of concurrent requests with as few script calls as the load allows."""

    def __init__(self, jobs: AsyncJobQueue, batch: int = BATCH) -> None:
        self.jobs = jobs
        self.batch = batch
        self._waiting: list[tuple[Job, asyncio.Future[str]]] = []
        self._sending: asyncio.Task[None] | None = None

    async def push(self, job: Job) -> str:
        """Enqueues ``job``, with whatever else is waiting; its new id."""
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting.append((job, future))
        if self._sending is None:
            self._sending = asyncio.create_task(self._send())
        return await future

    async def _send(self) -> None:
        """Sends what waits, a batch per call, until nothing does."""
        try:
            while self._waiting:
                batch = self._waiting[: self.batch]
                del self._waiting[: self.batch]
                await self._send_batch(batch)
        finally:
            self._sending = None

    async def _send_batch(self, batch: Sequence[tuple[Job, asyncio.Future[str]]]) -> None:
        try:
            ids = await self.jobs.push_many([job for job, _ in batch])
        except FairQueueError as exc:
            if len(batch) == 1:
                _settle(batch[0][1], exc)
                return
            for one in batch:  # one job's refusal: each alone, for its own outcome
                await self._send_batch([one])
            return
        except BaseException as exc:  # the server is away, or the master stops
            for _, future in batch:
                _settle(future, exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), job_id in zip(batch, ids, strict=True):
            if not future.done():  # its request may have been cancelled meanwhile
                future.set_result(job_id)


def _settle(future: asyncio.Future[str], exc: BaseException) -> None:
    if future.done():
        return
    if isinstance(exc, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(exc)
