"""Each strict-policy job operation as a plan (:mod:`fairque.engine.shards`), over one
namespace or the shards of one job queue (a JQ master with ``--shards``).

A job's shard is chosen by its name (CRC-32, as a fair queue's tenant), so the jobs of
one name keep their strict order, and a constraint that selects by name counts every job
it limits in one namespace. Pushes go to their names' shards (atomic per shard); a pop
asks the shards of the names it serves (every shard without names) in a rotating order;
outcomes go to their job's shard; calls by id look for the shard that holds the job;
lists page through the shards in turn. A constraint is written to every shard and limits
each shard's jobs, which is exact when it selects by ``name equals`` (one shard holds
them all) and otherwise a limit per shard.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fairque.engine.keys import Namespace
from fairque.engine.records import TaskState
from fairque.engine.shards import Plan, ShardPlans, Steps, shard_index
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


class JobPlans(ShardPlans[JobOps]):
    """The plans of every strict-policy operation over ``namespaces``: one, or the shards
    of one job queue. The arguments are checked where each call is built
    (:class:`~fairque.jobs.ops.JobOps`)."""

    def __init__(self, namespaces: Sequence[str]) -> None:
        super().__init__([JobOps(Namespace(name)) for name in namespaces])

    def for_name(self, name: str) -> JobOps:
        """The calls of the shard that holds the jobs named ``name``."""
        return self.single or self.shards[shard_index(name, len(self.shards))]

    def push(self, jobs: Sequence[Job]) -> Plan[list[str]]:
        """Pushes, atomically per shard; the ids in the order of ``jobs``."""
        if self.single is not None:
            return self.single.push(jobs)
        return self._push_split(jobs)

    def _push_split(self, jobs: Sequence[Job]) -> Steps[list[str]]:
        groups = self.split([job.name for job in jobs])
        parts = yield [ops.push([jobs[i] for i in positions]) for ops, positions in groups]
        ids = [""] * len(jobs)
        for (_, positions), part in zip(groups, parts, strict=True):
            for position, job_id in zip(positions, part, strict=True):
                ids[position] = job_id
        return ids

    def pop(
        self, worker_id: str, count: int, names: Sequence[str], grace: float
    ) -> Plan[list[LeasedJob]]:
        """Leases up to ``count`` jobs of ``names`` (any, if empty), asking the shards that
        hold them in a rotating order, each only for what the ones before it did not
        give."""
        if self.single is not None:
            return self.single.pop(worker_id, count, names, grace)
        return self._pop_rotating(worker_id, count, names, grace)

    def _pop_rotating(
        self, worker_id: str, count: int, names: Sequence[str], grace: float
    ) -> Steps[list[LeasedJob]]:
        holding = {shard_index(name, len(self.shards)) for name in names}
        got: list[LeasedJob] = []
        for index in self.rotation.next_order():
            if holding and index not in holding:
                continue
            wanted = count - len(got) if got else count  # as given: the call checks it
            got += (yield [self.shards[index].pop(worker_id, wanted, names, grace)])[0]
            if len(got) >= count:
                break
        return got

    def complete_many(
        self, outcomes: Sequence[tuple[LeasedJob, JobOutcome | None]], result_ttl: float
    ) -> Plan[list[TaskState | FairQueueError]]:
        """Records outcomes (None: hands the job back), one call per shard; per job, its
        new state or the error of its outcome, in order."""
        if self.single is not None:
            return self.single.complete_many(outcomes, result_ttl)
        return self._complete_split(outcomes, result_ttl)

    def _complete_split(
        self, outcomes: Sequence[tuple[LeasedJob, JobOutcome | None]], result_ttl: float
    ) -> Steps[list[TaskState | FairQueueError]]:
        groups = self.split([job.name for job, _ in outcomes])
        parts = yield [
            ops.complete_many([outcomes[i] for i in positions], result_ttl)
            for ops, positions in groups
        ]
        states: list[Any] = [None] * len(outcomes)
        for (_, positions), part in zip(groups, parts, strict=True):
            for position, state in zip(positions, part, strict=True):
                states[position] = state
        return states

    def take_result(self, job_id: str) -> Plan[Any]:
        """The kept result of a job, once, from the shard that holds it."""
        return self.on_holder(job_id, lambda ops: ops.take_result(job_id))

    def get(self, job_id: str) -> Plan[JobInfo | None]:
        """A job from whichever shard holds it, or None."""
        return self.found(lambda ops: ops.get(job_id))

    def report(
        self,
        job_id: str,
        lease_token: str,
        progress: float | None,
        message: str,
        lines: Sequence[str],
    ) -> Plan[int]:
        """Records a running job's progress and log lines on the shard that holds it."""
        return self.on_holder(
            job_id, lambda ops: ops.report(job_id, lease_token, progress, message, lines)
        )

    def cancel(self, job_id: str) -> Plan[bool]:
        """Cancels a job on the shard that holds it."""
        return self.on_holder(job_id, lambda ops: ops.cancel(job_id))

    def retry(self, job_id: str) -> Plan[bool]:
        """Queues a failed job again on the shard that holds it."""
        return self.on_holder(job_id, lambda ops: ops.retry(job_id))

    def jobs(self, state: str, name: str | None, cursor: int, limit: int) -> Plan[JobPage]:
        """A page of the jobs in ``state``, shard after shard (a name's: its shard's)."""
        if name is not None or self.single is not None:
            ops = self.single or self.for_name(str(name))
            return ops.jobs(state, name, cursor, limit)
        return self.paged(
            cursor, limit, lambda ops, inner, wanted: ops.jobs(state, None, inner, wanted),
            lambda pages, following: JobPage([job for page in pages for job in page.jobs],
                                             following),
            lambda page: len(page.jobs),
        )  # fmt: skip

    def set_constraint(self, constraint_id: str, constraint: Constraint) -> Plan[int]:
        """Creates or replaces a constraint on every shard; how many ready jobs it re-sorted."""
        return self.each(lambda ops: ops.set_constraint(constraint_id, constraint), sum)

    def delete_constraint(self, constraint_id: str) -> Plan[int]:
        """Deletes a constraint from every shard."""
        return self.each(lambda ops: ops.delete_constraint(constraint_id), sum)

    def constraints(self) -> Plan[list[ConstraintStatus]]:
        """Every constraint with its use, summed over the shards."""
        return self.each(lambda ops: ops.constraints(), merge_constraints)


def merge_constraints(parts: list[list[ConstraintStatus]]) -> list[ConstraintStatus]:
    """The shards' constraint statuses as one: each constraint once, its running and
    started jobs summed (every shard holds every constraint)."""
    merged: dict[str, ConstraintStatus] = {}
    for part in parts:
        for status in part:
            known = merged.get(status.id)
            if known is None:
                merged[status.id] = status
            else:
                merged[status.id] = ConstraintStatus(
                    status.id,
                    known.constraint,
                    known.running + status.running,
                    known.started + status.started,
                )
    return [merged[constraint_id] for constraint_id in sorted(merged)]
