# Generated from fairque/jobs/async_client.py by tools/unasync.py: edit that file instead.
"""Strict-policy job clients: :class:`JobQueue`.

Facades that run the plans of :mod:`fairque.jobs.plans` (one namespace, or the shards of
a job queue). Jobs share their namespace's key space, leases and stats with the fair
queue; pass a fair queue (or an executor) to share its connection pool too. The asyncio
client is written by hand in :mod:`fairque.jobs.async_client`; the blocking one, in
:mod:`fairque.jobs.client`, is generated from it (``tools/unasync.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fairque.config import QueueSettings
from fairque.engine import settings as settings_store
from fairque.engine.executor import Bound, Closing, Executor
from fairque.engine.keys import Namespace
from fairque.engine.records import TaskState
from fairque.engine.shards import shard_namespaces
from fairque.errors import FairQueueError
from fairque.jobs.models import (
    Constraint,
    ConstraintStatus,
    Job,
    JobInfo,
    JobOutcome,
    JobPage,
    LeasedJob,
)
from fairque.jobs.ops import JobOps
from fairque.jobs.plans import JobPlans, merge_constraints, name_of, outcome_name

RESULT_TTL = 3600.0  # seconds a kept result waits for its pusher
LEASE_GRACE = 5.0  # seconds a lease outlives the job's timeout


class JobQueue(Closing):
    """Strict-policy jobs in one namespace, or split over ``shards`` namespaces
    (:mod:`fairque.jobs.plans`). Given a fair queue of the namespace instead of a URL, it
    shares the queue's connection pool and settings.

    >>> jobs = JobQueue("redis://localhost:6379/0")  # doctest: +SKIP
    >>> jobs.push(Job(name="resize", argument={"w": 64}, priority=-5))  # doctest: +SKIP
    """

    def __init__(
        self,
        url: str | Bound | None = None,
        namespace: str = "default",
        *,
        shards: int = 1,
        settings: QueueSettings | None = None,
        executor: Executor | None = None,
        result_ttl: float = RESULT_TTL,
        lease_grace: float = LEASE_GRACE,
    ) -> None:
        if isinstance(url, str) or url is None:
            names = shard_namespaces(namespace, shards) if shards > 1 else [namespace]
            self.plans = JobPlans(names)
            self.owns_executor = executor is None
            self.executor = executor or Executor.connect(url)
            for shard in self.plans.namespaces:
                settings_store.write_on_first_use(self.executor, shard, settings)
        else:  # another client of the namespace: its pool and settings
            self.plans = JobPlans([url.namespace.name])
            self.owns_executor = False
            self.executor = url.executor
        self.ops = self.plans.shards[0]  # the first shard's calls (the only one's, mostly)
        self.result_ttl = result_ttl
        self.lease_grace = lease_grace

    @property
    def namespace(self) -> Namespace:
        """The namespace's keys and settings (the first shard's, when sharded)."""
        return self.ops.namespace

    def push(self, job: Job) -> str:
        """Enqueues a job; returns its new id."""
        return self.executor.execute(self.plans.by_name(job.name, JobOps.push_one, job))

    def push_many(self, jobs: Sequence[Job]) -> list[str]:
        """Enqueues jobs atomically (all or none; per shard when sharded); returns their
        ids in order."""
        return self.executor.run(self.plans.scattered(name_of, jobs, JobOps.push))

    def pop(self, worker_id: str, count: int = 1, names: Sequence[str] = ()) -> list[LeasedJob]:
        """Leases up to ``count`` jobs by the strict policy (of ``names``, if given)."""
        return self.executor.run(self.plans.pop(worker_id, count, names, self.lease_grace))

    def complete(self, job: LeasedJob, outcome: JobOutcome) -> TaskState:
        """Records a result object; returns the job's new state."""
        call = self.plans.by_name(job.name, JobOps.complete, job, outcome, self.result_ttl)
        return self.executor.execute(call)

    def release(self, job: LeasedJob) -> TaskState:
        """Hands a job that never reached a worker back to the queue."""
        return self.executor.execute(self.plans.by_name(job.name, JobOps.release, job))

    def complete_many(
        self, outcomes: Sequence[tuple[LeasedJob, JobOutcome | None]]
    ) -> list[TaskState | FairQueueError]:
        """Records result objects (None: hands the job back), each on its own: per job,
        its new state or the error of its outcome (e.g. LeaseLost), in order."""
        return self.executor.run(
            self.plans.scattered(outcome_name, outcomes, JobOps.complete_many, self.result_ttl)
        )

    def result(self, job_id: str) -> Any:
        """The kept result object, once; None afterwards, after its TTL, or if not kept."""
        return self.executor.run(self.plans.on_holder(job_id, JobOps.take_result, job_id))

    def get(self, job_id: str) -> JobInfo | None:
        """What is stored about a job; None if there is no such job."""
        return self.executor.run(self.plans.found(JobOps.get, job_id))

    def report(
        self,
        job_id: str,
        lease_token: str,
        progress: float | None = None,
        message: str = "",
        lines: Sequence[str] = (),
    ) -> int:
        """Records a running job's progress (any finite number, with a message of up to
        200 characters) and log lines (the newest 100 kept, up to 1,000 characters each)
        in its record (``get`` shows them); returns how many log lines it holds. Raises
        LeaseLost unless ``lease_token`` (the job's ``LeasedJob.lease_token``) still holds
        the job. An HTTP worker's job functions call it through the master
        (``context.progress``, ``context.log``)."""
        plan = self.plans.on_holder(
            job_id, JobOps.report, job_id, lease_token, progress, message, lines
        )
        return self.executor.run(plan)

    def cancel(self, job_id: str) -> bool:
        """Cancels a job that has not started; False if it is running or has ended."""
        return self.executor.run(self.plans.on_holder(job_id, JobOps.cancel, job_id))

    def retry(self, job_id: str) -> bool:
        """Queues a FAILED job again now; False if it had not failed."""
        return self.executor.run(self.plans.on_holder(job_id, JobOps.retry, job_id))

    def jobs(
        self, state: str, name: str | None = None, cursor: int = 0, limit: int = 50
    ) -> JobPage:
        """A page of the jobs in ``state``."""
        return self.executor.run(self.plans.jobs(state, name, cursor, limit))

    def set_constraint(self, constraint_id: str, constraint: Constraint) -> int:
        """Creates or replaces a constraint; returns how many ready jobs it re-sorted.
        Sharded, it limits each shard's jobs (exact for one that selects by name)."""
        return self.executor.run(
            self.plans.each(sum, JobOps.set_constraint, constraint_id, constraint)
        )

    def delete_constraint(self, constraint_id: str) -> int:
        """Deletes a constraint."""
        plan = self.plans.each(sum, JobOps.delete_constraint, constraint_id)
        return self.executor.run(plan)

    def constraints(self) -> list[ConstraintStatus]:
        """Every constraint with its current use."""
        return self.executor.run(self.plans.each(merge_constraints, JobOps.constraints))
