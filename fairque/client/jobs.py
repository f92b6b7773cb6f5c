"""Strict-policy job clients (seed 003): :class:`JobQueue` and :class:`AsyncJobQueue`.

Thin facades over :class:`fairque.jobs.JobOps` that send through a fair-queue client of
the same namespace, so both policies share one connection pool and key space.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fairque.client.aio import AsyncFairQueue
from fairque.client.sync import FairQueue
from fairque.jobs import (
    Constraint,
    ConstraintStatus,
    Job,
    JobInfo,
    JobOps,
    JobPage,
    LeasedJob,
    Outcome,
)
from fairque.models import TaskState

RESULT_TTL = 3600.0  # seconds a kept result waits for its pusher
LEASE_GRACE = 5.0  # seconds a lease outlives the job's timeout


class JobQueue:
    """Strict-policy jobs in the namespace of ``queue``.

    >>> jobs = JobQueue(FairQueue())  # doctest: +SKIP
    >>> jobs.push(Job(name="resize", argument={"w": 64}, priority=-5))  # doctest: +SKIP
    """

    def __init__(
        self, queue: FairQueue, *, result_ttl: float = RESULT_TTL, lease_grace: float = LEASE_GRACE
    ) -> None:
        self.queue = queue
        self.ops = JobOps(queue.ops)
        self.result_ttl = result_ttl
        self.lease_grace = lease_grace

    def push(self, job: Job) -> str:
        """Enqueues a job; returns its new id."""
        return self.queue.execute(self.ops.push([job]))[0]

    def push_many(self, jobs: Sequence[Job]) -> list[str]:
        """Enqueues jobs atomically (all or none); returns their ids in order."""
        return self.queue.execute(self.ops.push(jobs))

    def pop(self, worker_id: str, count: int = 1, names: Sequence[str] = ()) -> list[LeasedJob]:
        """Leases up to ``count`` jobs by the strict policy (of ``names``, if given)."""
        return self.queue.execute(self.ops.pop(worker_id, count, names, self.lease_grace))

    def complete(self, job: LeasedJob, outcome: Outcome) -> TaskState:
        """Records a result object; returns the job's new state."""
        return self.queue.execute(self.ops.complete(job, outcome, self.result_ttl))

    def release(self, job: LeasedJob) -> TaskState:
        """Hands a job that never reached a worker back to the queue."""
        return self.queue.execute(self.ops.release(job))

    def result(self, job_id: str) -> Any:
        """The kept result object, once; None afterwards, after its TTL, or if not kept."""
        return self.queue.execute(self.ops.take_result(job_id))

    def get(self, job_id: str) -> JobInfo | None:
        """What is stored about a job; None if there is no such job."""
        return self.queue.execute(self.ops.get(job_id))

    def jobs(
        self, state: str, name: str | None = None, cursor: int = 0, limit: int = 50
    ) -> JobPage:
        """A page of the jobs in ``state``."""
        return self.queue.execute(self.ops.jobs(state, name, cursor, limit))

    def set_constraint(self, constraint_id: str, constraint: Constraint) -> int:
        """Creates or replaces a constraint; returns how many ready jobs it re-sorted."""
        return self.queue.execute(self.ops.set_constraint(constraint_id, constraint))

    def delete_constraint(self, constraint_id: str) -> int:
        """Deletes a constraint."""
        return self.queue.execute(self.ops.delete_constraint(constraint_id))

    def constraints(self) -> list[ConstraintStatus]:
        """Every constraint with its current use."""
        return self.queue.execute(self.ops.constraints())


class AsyncJobQueue:
    """:class:`JobQueue` for asyncio: every method is a coroutine."""

    def __init__(
        self,
        queue: AsyncFairQueue,
        *,
        result_ttl: float = RESULT_TTL,
        lease_grace: float = LEASE_GRACE,
    ) -> None:
        self.queue = queue
        self.ops = JobOps(queue.ops)
        self.result_ttl = result_ttl
        self.lease_grace = lease_grace

    async def push(self, job: Job) -> str:
        """Enqueues a job; returns its new id."""
        return (await self.queue.execute(self.ops.push([job])))[0]

    async def push_many(self, jobs: Sequence[Job]) -> list[str]:
        """Enqueues jobs atomically (all or none); returns their ids in order."""
        return await self.queue.execute(self.ops.push(jobs))

    async def pop(
        self, worker_id: str, count: int = 1, names: Sequence[str] = ()
    ) -> list[LeasedJob]:
        """Leases up to ``count`` jobs by the strict policy (of ``names``, if given)."""
        return await self.queue.execute(self.ops.pop(worker_id, count, names, self.lease_grace))

    async def complete(self, job: LeasedJob, outcome: Outcome) -> TaskState:
        """Records a result object; returns the job's new state."""
        return await self.queue.execute(self.ops.complete(job, outcome, self.result_ttl))

    async def release(self, job: LeasedJob) -> TaskState:
        """Hands a job that never reached a worker back to the queue."""
        return await self.queue.execute(self.ops.release(job))

    async def result(self, job_id: str) -> Any:
        """The kept result object, once; None afterwards, after its TTL, or if not kept."""
        return await self.queue.execute(self.ops.take_result(job_id))

    async def get(self, job_id: str) -> JobInfo | None:
        """What is stored about a job; None if there is no such job."""
        return await self.queue.execute(self.ops.get(job_id))

    async def jobs(
        self, state: str, name: str | None = None, cursor: int = 0, limit: int = 50
    ) -> JobPage:
        """A page of the jobs in ``state``."""
        return await self.queue.execute(self.ops.jobs(state, name, cursor, limit))

    async def set_constraint(self, constraint_id: str, constraint: Constraint) -> int:
        """Creates or replaces a constraint; returns how many ready jobs it re-sorted."""
        return await self.queue.execute(self.ops.set_constraint(constraint_id, constraint))

    async def delete_constraint(self, constraint_id: str) -> int:
        """Deletes a constraint."""
        return await self.queue.execute(self.ops.delete_constraint(constraint_id))

    async def constraints(self) -> list[ConstraintStatus]:
        """Every constraint with its current use."""
        return await self.queue.execute(self.ops.constraints())
