"""Calls of concurrent requests sent together (:class:`~fairque.engine.batching.Batcher`):
the master's single pushes, and the results its dispatcher records.

For a single push or a result, the script's fixed cost, redis-py's packing of the call
and the round trip were most of the cost: under load each call carries what arrived
during the previous one. The push script stores a batch all or none, so a batch refused
for one job's sake (a payload over the namespace's limit) is sent again one job per
call: the others are stored, and the refused one gets the error it would have had alone.
"""

from __future__ import annotations

from fairque.engine.batching import Batcher
from fairque.engine.calls import MAX_BATCH
from fairque.engine.records import TaskState
from fairque.jobs import Job, JobOutcome, LeasedJob
from fairque.jobs.async_client import AsyncJobQueue

BATCH = min(100, MAX_BATCH)  # items per call at most: bounds one script's run on the server


def pushes(jobs: AsyncJobQueue, size: int = BATCH) -> Batcher[Job, str]:
    """Single pushes sent together; each answers its job's new id."""
    return Batcher(jobs.push_many, size)


Completion = tuple[LeasedJob, JobOutcome | None]  # None: hand the job back


def completions(jobs: AsyncJobQueue, size: int = BATCH) -> Batcher[Completion, TaskState]:
    """Result objects recorded together; each answers its job's new state (or raises
    e.g. LeaseLost)."""
    return Batcher(jobs.complete_many, size)
