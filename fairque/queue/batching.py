"""Auto-batching for the asyncio client: pushes made concurrently in one event loop go
to the server together, in one push script call (:class:`~fairque.engine.batching.Batcher`).

A push is checked and encoded at once, in its caller
(:func:`~fairque.queue.calls.push.push_row`), so a task that cannot be sent fails its own
caller only. It then waits; a sender task takes
everything that waits and sends it as one call, and while that call is in flight the
pushes made meanwhile gather for the next one. One call is in flight at a time, so the
server stores pushes in the order they were made. Under load the batches grow by
themselves (100 producers: ~100 tasks a call); alone, a push goes out on the next turn
of the loop, at the cost of one scheduling step.

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

from fairque.engine.async_executor import AsyncExecutor
from fairque.engine.batching import Batcher
from fairque.engine.calls import check_replicas
from fairque.engine.executor import Executor
from fairque.engine.keys import Namespace
from fairque.queue.calls.push import PushRow, push_one, push_row, push_rows
from fairque.queue.models import Task

MAX_TASKS = 1_000  # tasks per coalesced call
MAX_BYTES = 4 * 1024 * 1024  # payload bytes per coalesced call (a bigger task goes alone)


class Pushes:
    """Sends the pushes of a :class:`~fairque.FairQueue` to one namespace, each at once."""

    def __init__(self, namespace: Namespace, executor: Executor) -> None:
        self.namespace = namespace
        self.executor = executor

    def push(self, task: Task, replicas: int, replica_timeout: float) -> str:
        """Pushes ``task``; its id."""
        call = push_one(self.namespace, task).replicated(replicas, replica_timeout)
        return self.executor.execute(call)

    def drain(self) -> None:
        """Nothing waits: each push was answered when it returned."""


class AsyncPushes:
    """Sends the pushes of an :class:`~fairque.AsyncFairQueue` to one namespace in
    batches (see the module's docstring)."""

    def __init__(self, namespace: Namespace, executor: AsyncExecutor) -> None:
        self.namespace = namespace
        self.executor = executor

        async def send(rows: list[PushRow]) -> list[str]:
            return await executor.execute(push_rows(namespace, rows))

        self.batcher: Batcher[PushRow, str] = Batcher(
            send, MAX_TASKS, MAX_BYTES, lambda row: len(row.payload)
        )

    async def push(self, task: Task, replicas: int, replica_timeout: float) -> str:
        """Pushes ``task`` with the others made meanwhile; its id. A push that waits for
        replicas goes alone, at once (its WAIT covers its own call)."""
        check_replicas(replicas, replica_timeout)
        if replicas:
            call = push_one(self.namespace, task).replicated(replicas, replica_timeout)
            return await self.executor.execute(call)
        return await self.batcher(push_row(task))

    async def drain(self) -> None:
        """Returns once every push made so far has been answered."""
        await self.batcher.drain()
