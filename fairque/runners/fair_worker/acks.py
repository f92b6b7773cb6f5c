"""A worker's acknowledgements: successes are acknowledged in batches, so a round trip
per task does not cap throughput. A pop carries those pending when it goes (one call,
``finish_and_pop``, on a queue of one namespace: :mod:`~fairque.runners.fair_worker.fetch`);
:meth:`Acknowledgements.run` sends the others in one ``finish_many`` when no pop is about
to go.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fairque.engine.outage import OUTAGE, Backoff, OutageLog
from fairque.errors import InvalidInput, LeaseLost
from fairque.queue.async_client import AsyncQueue
from fairque.queue.models import LeasedTask
from fairque.runners.fair_worker.counts import Counts

log = logging.getLogger("fairque.worker")

Ack = tuple[LeasedTask, Any]  # a task that succeeded, and its result


class Acknowledgements:
    """The successes not yet acknowledged, and the sending of them."""

    def __init__(self, counts: Counts, outage: OutageLog) -> None:
        self.counts = counts
        self.outage = outage
        self.pending: list[Ack] = []  # finished, not yet acknowledged
        self.waiting = asyncio.Event()  # wakes run(): acknowledgements are pending
        self.closing = False

    def add(self, leased: LeasedTask, result: Any) -> None:
        """A success to acknowledge (run() wakes when the run's slot is freed: :meth:`wake`)."""
        self.pending.append((leased, result))

    def wake(self) -> None:
        """Wakes :meth:`run` if acknowledgements are pending."""
        if self.pending:
            self.waiting.set()

    def close(self) -> None:
        """Makes :meth:`run` send what is pending, then end."""
        self.closing = True
        self.waiting.set()

    async def run(self, queue: AsyncQueue) -> None:
        """Sends the acknowledgements no pop carried (``Fetcher``'s pops carry
        those pending when they are sent), when no pop is about to go (an idle worker,
        two pops in flight already, work running out: a pop came back short, a stop, a
        sharded queue), so that none waits for a pop that is not coming. It runs until
        the worker closes and none is left: results that came in while a flush was in
        flight at the stop are sent too (they were left, and their tasks ran again once
        their lease expired)."""
        backoff = Backoff()
        while True:
            await self.waiting.wait()
            # Woken after the fetch loop (see Runs.start's done()), and one turn later
            # still: a pop built meanwhile has taken them.
            await asyncio.sleep(0)
            try:
                await self.flush(queue)
                backoff.reset()
            except OUTAGE as exc:
                if self.closing:
                    return  # the server is away at the stop: the leases bring them back
                self.outage.failed(exc)
                await asyncio.sleep(backoff.next())
            if self.closing and not self.pending:
                return

    async def flush(self, queue: AsyncQueue) -> None:
        """Sends every pending acknowledgement in one call (kept for later if it fails)."""
        batch = self.take()
        if not batch:
            return
        try:
            lost = await queue.finish_many([task for task, _ in batch], [r for _, r in batch])
        except OUTAGE:
            self.unsent(batch)
            raise
        except InvalidInput:  # nothing was written: a result was refused
            await self.refused(queue, batch)
            return
        self.sent(batch, lost)

    def take(self) -> list[Ack]:
        """The pending acknowledgements, taken to be sent."""
        self.waiting.clear()
        batch, self.pending = self.pending, []
        return batch

    def unsent(self, batch: list[Ack]) -> None:
        """Acknowledgements taken but not sent (the server is away): pending again, first."""
        self.pending[:0] = batch
        self.waiting.set()

    def sent(self, batch: list[Ack], lost: list[str]) -> None:
        """Counts the tasks a call finished, and says which it found leased no more."""
        self.counts.finished += len(batch) - len(lost)
        if lost:
            by_id = {task.task_id: task for task, _ in batch}
            for task_id in lost:
                log.warning("task %s: lease lost before its result was recorded", task_id,
                            extra=by_id[task_id].log_fields())  # fmt: skip

    async def refused(self, queue: AsyncQueue, batch: list[Ack]) -> None:
        """A batch refused before anything was written, for a result that cannot be
        serialised or is over the namespace's ``max_payload_bytes``: each task is finished
        on its own, and one whose result is refused fails for good, its error saying why,
        so that one result never holds back the others (it stopped every acknowledgement
        after it before). The rest go back to the pending ones if the server goes away."""
        for position, (task, result) in enumerate(batch):
            try:
                await self._alone(queue, task, result)
            except OUTAGE:  # noqa: PERF203 - the rare path of a refused batch
                self.unsent(batch[position:])
                raise

    async def _alone(self, queue: AsyncQueue, task: LeasedTask, result: Any) -> None:
        try:
            lost = await queue.finish_many([task], [result])
        except InvalidInput as exc:
            log.warning("task %s: its result was refused (%s); it fails", task.task_id, exc,
                        extra=task.log_fields())  # fmt: skip
            try:
                await queue.fail(task, f"result refused: {exc}", retry=False)
            except LeaseLost:
                log.warning("task %s: lease lost before its failure was recorded", task.task_id,
                            extra=task.log_fields())  # fmt: skip
                return
            self.counts.failed += 1
            return
        self.sent([(task, result)], lost)
