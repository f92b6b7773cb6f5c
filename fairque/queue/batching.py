"""Auto-batching for the asyncio client: pushes made concurrently in one event loop go
to the server together, in one push script call.

A push is checked and encoded at once, in its caller (:meth:`QueueOps.push_row`), so a
task that cannot be sent fails its own caller only. It then waits in a queue; a sender
task takes everything that waits and sends it as one call, and while that call is in
flight the pushes made meanwhile gather for the next one. One call is in flight at a
time, so the server stores pushes in the order they were made. Under load the batches
grow by themselves (100 producers: ~100 tasks a call); alone, a push goes out on the
next turn of the loop, at the cost of one scheduling step.

The push script stores a batch all or none. When it refuses one (a duplicate id, an
unknown or canceled dependency, a payload over the namespace's limit), nothing was
written, so the batch's tasks are sent again one call each, in order: each caller gets
its own id or its own error, as if it had pushed alone. A caller cancelled while its
push waits takes it out of the batch; once sent, the push stands and the others are
unaffected. :meth:`AsyncPushes.drain` (``close()``) waits until every push made has
been answered.

:class:`Pushes` is its blocking twin: a thread's pushes are sent one call each, at once.
"""

from __future__ import annotations

import asyncio
from collections import deque

from fairque.engine.calls import check_replicas
from fairque.engine.executor import AsyncExecutor, Executor
from fairque.errors import FairQueueError
from fairque.queue.models import Task
from fairque.queue.ops import PushRow, QueueOps

MAX_TASKS = 1_000  # tasks per coalesced call
MAX_BYTES = 4 * 1024 * 1024  # payload bytes per coalesced call (a bigger task goes alone)

_Waiting = tuple[PushRow, "asyncio.Future[str]"]


class Pushes:
    """Sends the pushes of a :class:`~fairque.FairQueue` to one namespace, each at once."""

    def __init__(self, ops: QueueOps, executor: Executor) -> None:
        self.ops = ops
        self.executor = executor

    def push(self, task: Task, replicas: int, replica_timeout: float) -> str:
        """Pushes ``task``; its id."""
        return self.executor.execute(self.ops.push_one(task).replicated(replicas, replica_timeout))

    def drain(self) -> None:
        """Nothing waits: each push was answered when it returned."""


class AsyncPushes:
    """Sends the pushes of an :class:`~fairque.AsyncFairQueue` to one namespace in
    batches (see the module's docstring)."""

    def __init__(self, ops: QueueOps, executor: AsyncExecutor) -> None:
        self.ops = ops
        self.executor = executor
        self._waiting: deque[_Waiting] = deque()
        self._sender: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def push(self, task: Task, replicas: int, replica_timeout: float) -> str:
        """Pushes ``task`` with the others made meanwhile; its id. A push that waits for
        replicas goes alone, at once (its WAIT covers its own call)."""
        check_replicas(replicas, replica_timeout)
        if replicas:
            call = self.ops.push_one(task).replicated(replicas, replica_timeout)
            return await self.executor.execute(call)
        row = self.ops.push_row(task)
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a client used from a new loop: the old one is gone
            self._loop, self._waiting, self._sender = loop, deque(), None
        waiter: asyncio.Future[str] = loop.create_future()
        self._waiting.append((row, waiter))
        if self._sender is None:
            self._sender = loop.create_task(self._send_waiting())
        return await waiter

    async def drain(self) -> None:
        """Returns once every push made so far has been answered."""
        while self._sender is not None and self._loop is asyncio.get_running_loop():
            await asyncio.wait({self._sender})

    async def _send_waiting(self) -> None:
        try:
            while batch := self._take():
                await self._send(batch)
        except BaseException:
            for _, waiter in self._waiting:  # the loop is going away: so are its pushes
                waiter.cancel()
            self._waiting.clear()
            raise
        finally:
            if self._sender is asyncio.current_task():  # not a sender of a later loop
                self._sender = None

    def _take(self) -> list[_Waiting]:
        """The next batch: the waiting pushes whose caller still waits, in order."""
        batch: list[_Waiting] = []
        size = 0
        while self._waiting and len(batch) < MAX_TASKS:
            row, waiter = self._waiting[0]
            if waiter.done():  # its caller was cancelled before it was sent
                self._waiting.popleft()
                continue
            size += len(row.payload)
            if batch and size > MAX_BYTES:
                break
            batch.append(self._waiting.popleft())
        return batch

    async def _send(self, batch: list[_Waiting]) -> None:
        try:
            try:
                ids = await self.executor.execute(self.ops.push_rows([row for row, _ in batch]))
            except FairQueueError:
                if len(batch) == 1:
                    raise
                # Refused as a whole, so nothing was written: each task on its own
                # (but not the task of a caller who stopped waiting meanwhile).
                for one in batch:
                    if not one[1].done():
                        await self._send([one])
                return
        except Exception as exc:  # a connection error, or this one task's refusal
            for _, waiter in batch:
                if not waiter.done():
                    waiter.set_exception(exc)
            return
        except BaseException:  # cancelled (the loop is going away), or interrupted
            for _, waiter in batch:
                waiter.cancel()
            raise
        for (_, waiter), task_id in zip(batch, ids, strict=True):
            if not waiter.done():
                waiter.set_result(task_id)
