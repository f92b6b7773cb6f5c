"""Calls of concurrent requests sent together: the master's single pushes, and the
results its dispatcher records.

A lone item is sent at once (no waiting for company); under load, each call carries what
arrived during the previous one. One script call of n items costs the server and the
master far less than n calls (the script's fixed cost, redis-py's packing of the call
and the round trip are paid once), and for a single push or a result that was most of
their cost.

Each caller keeps its own outcome: ``send`` answers per item, a value or an exception.
The push script stores a batch all or none, so :func:`pushes` sends a batch refused for
one job's sake (a payload over the namespace's limit) again one job per call: the
others are stored, and the refused one gets the error it would have had alone. An error
that is no item's fault (the server is away) is every caller's error, as it would have
been had each been sent alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from fairque.engine.calls import MAX_BATCH
from fairque.engine.records import TaskState
from fairque.errors import FairQueueError
from fairque.jobs import Job, JobOutcome, LeasedJob
from fairque.jobs.async_client import AsyncJobQueue

BATCH = min(100, MAX_BATCH)  # items per call at most: bounds one script's run on the server

Item = TypeVar("Item")
Outcome = TypeVar("Outcome")
Send = Callable[[list[Item]], Awaitable[Sequence[Outcome | FairQueueError]]]


class Batches(Generic[Item, Outcome]):
    """Sends the items of concurrent callers with as few calls as the load allows."""

    def __init__(self, send: Send[Item, Outcome], size: int = BATCH) -> None:
        self.send = send
        self.size = size
        self._waiting: list[tuple[Item, asyncio.Future[Outcome]]] = []
        self._sending: asyncio.Task[None] | None = None

    async def __call__(self, item: Item) -> Outcome:
        """Sends ``item`` with whatever else is waiting; its outcome (or raises its error)."""
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._waiting.append((item, future))
        if self._sending is None:
            self._sending = asyncio.create_task(self._send())
        return await future

    async def _send(self) -> None:
        """Sends what waits, a batch per call, until nothing does."""
        try:
            while self._waiting:
                batch = self._waiting[: self.size]
                del self._waiting[: self.size]
                await self._send_batch(batch)
        finally:
            self._sending = None

    async def _send_batch(self, batch: list[tuple[Item, asyncio.Future[Outcome]]]) -> None:
        try:
            outcomes = await self.send([item for item, _ in batch])
        except BaseException as exc:  # the server is away, or the master stops
            for _, future in batch:
                _settle(future, exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, FairQueueError):
                _settle(future, outcome)
            elif not future.done():  # its caller may have been cancelled meanwhile
                future.set_result(outcome)


def _settle(future: asyncio.Future[Outcome], exc: BaseException) -> None:
    if future.done():
        return
    if isinstance(exc, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(exc)


def pushes(jobs: AsyncJobQueue, size: int = BATCH) -> Batches[Job, str]:
    """Single pushes sent together; each answers its job's new id."""

    async def send(batch: list[Job]) -> list[str | FairQueueError]:
        try:
            return list(await jobs.push_many(batch))
        except FairQueueError as exc:
            if len(batch) == 1:
                return [exc]
        return [outcome for job in batch for outcome in await send([job])]  # each alone

    return Batches(send, size)


Completion = tuple[LeasedJob, JobOutcome | None]  # None: hand the job back


def completions(jobs: AsyncJobQueue, size: int = BATCH) -> Batches[Completion, TaskState]:
    """Result objects recorded together; each answers its job's new state (or raises
    e.g. LeaseLost)."""

    async def send(batch: list[Completion]) -> list[TaskState | FairQueueError]:
        try:
            return await jobs.complete_many(batch)
        except FairQueueError as exc:  # a result refused before it was sent
            if len(batch) == 1:
                return [exc]
        return [outcome for one in batch for outcome in await send([one])]  # each alone

    return Batches(send, size)
