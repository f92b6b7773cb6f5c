"""Calls of concurrent callers sent together: :class:`Batcher`, the one algorithm behind
the asyncio fair queue's pushes and the JQ master's pushes and results.

A caller hands its item over and waits for its own outcome. A sender task takes what
waits, up to ``max_items`` (and ``max_bytes`` of ``size``), and makes one call of it;
while that call is in flight, the items handed over meanwhile gather for the next one.
One call is in flight at a time, so items reach the server in the order they came.
Alone, an item goes out on the next turn of the loop; under load, batches grow by
themselves. One script call of n items costs the server and the client far less than n
calls: the script's fixed cost, the packing and the round trip are paid once.

``send`` answers per item, a value or a :class:`~fairque.errors.FairQueueError` of that
item's own. When it raises a fairque error for a whole batch (a script that stores all or
none refused it), nothing was written, so each item still awaited is sent again alone:
each caller gets the answer it would have had alone. Any other error (the server is away)
is every caller's. A caller cancelled while its item waits takes it out of the batch;
once sent, the call stands. :meth:`Batcher.drain` waits until every item handed over
has been answered.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from fairque.errors import FairQueueError, ServerUnavailable

Item = TypeVar("Item")
Outcome = TypeVar("Outcome")
Send = Callable[[list[Item]], Awaitable[Sequence["Outcome | FairQueueError"]]]


class Batcher(Generic[Item, Outcome]):
    """Sends the items of concurrent callers in as few calls as the load allows (see the
    module's docstring)."""

    def __init__(
        self,
        send: Send[Item, Outcome],
        max_items: int,
        max_bytes: int | None = None,
        size: Callable[[Item], int] | None = None,
    ) -> None:
        self.send = send
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.size = size
        self._waiting: deque[tuple[Item, asyncio.Future[Outcome]]] = deque()
        self._sender: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def __call__(self, item: Item) -> Outcome:
        """Sends ``item`` with the others handed over meanwhile; its outcome, or its error."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # used from a new loop: the old one is gone
            self._loop, self._waiting, self._sender = loop, deque(), None
        future: asyncio.Future[Outcome] = loop.create_future()
        self._waiting.append((item, future))
        if self._sender is None:
            self._sender = loop.create_task(self._send_waiting())
        return await future

    async def drain(self) -> None:
        """Returns once every item handed over so far has been answered."""
        while self._sender is not None and self._loop is asyncio.get_running_loop():
            await asyncio.wait({self._sender})

    async def _send_waiting(self) -> None:
        try:
            while batch := self._take():
                await self._send(batch)
        except BaseException:
            for _, future in self._waiting:  # the loop is going away: so are its items
                future.cancel()
            self._waiting.clear()
            raise
        finally:
            if self._sender is asyncio.current_task():  # not a sender of a later loop
                self._sender = None

    def _take(self) -> list[tuple[Item, asyncio.Future[Outcome]]]:
        """The next batch: the waiting items whose caller still waits, in order."""
        batch: list[tuple[Item, asyncio.Future[Outcome]]] = []
        total = 0
        while self._waiting and len(batch) < self.max_items:
            item, future = self._waiting[0]
            if future.done():  # its caller was cancelled before it was sent
                self._waiting.popleft()
                continue
            if self.max_bytes is not None and self.size is not None:
                total += self.size(item)
                if batch and total > self.max_bytes:
                    break
            batch.append(self._waiting.popleft())
        return batch

    async def _send(self, batch: list[tuple[Item, asyncio.Future[Outcome]]]) -> None:
        try:
            try:
                outcomes = await self.send([item for item, _ in batch])
            except ServerUnavailable:  # may have been written: never sent again here
                raise
            except FairQueueError:
                if len(batch) == 1:
                    raise
                # Refused as a whole, so nothing was written: each item on its own (but
                # not the item of a caller who stopped waiting meanwhile).
                for one in batch:
                    if not one[1].done():
                        await self._send([one])
                return
        except Exception as exc:  # the server is away, or this one item's refusal
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        except BaseException:  # cancelled (the loop is going away), or interrupted
            for _, future in batch:
                future.cancel()
            raise
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if future.done():  # its caller was cancelled meanwhile
                continue
            if isinstance(outcome, FairQueueError):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
