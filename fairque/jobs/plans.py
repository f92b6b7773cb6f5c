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

from collections.abc import Callable, Sequence
from typing import Concatenate, ParamSpec, TypeVar

from fairque.engine.calls import Call
from fairque.engine.keys import Namespace
from fairque.engine.shards import Plan, ShardPlans, Steps, shard_index
from fairque.jobs.models import ConstraintStatus, Job, JobOutcome, JobPage, LeasedJob
from fairque.jobs.ops import JobOps

T = TypeVar("T")
A = ParamSpec("A")


class JobPlans(ShardPlans[JobOps]):
    """Where the strict-policy operations run over ``namespaces``: one, or the shards of
    one job queue. The policies of :class:`~fairque.engine.shards.ShardPlans` and
    :meth:`by_name` serve the operations that only choose shards; :meth:`pop` has logic
    of its own. The arguments are checked where each call is built
    (:class:`~fairque.jobs.ops.JobOps`)."""

    def __init__(self, namespaces: Sequence[str]) -> None:
        shards = [JobOps(Namespace(name)) for name in namespaces]
        super().__init__(shards, [ops.namespace for ops in shards])

    def by_name(
        self,
        name: str,
        build: Callable[Concatenate[JobOps, A], Call[T]],
        *args: A.args,
        **kwargs: A.kwargs,
    ) -> Call[T]:
        """The call on the shard that holds the jobs named ``name``."""
        ops = self.single or self.shards[shard_index(name, len(self.shards))]
        return build(ops, *args, **kwargs)

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

    def jobs(self, state: str, name: str | None, cursor: int, limit: int) -> Plan[JobPage]:
        """A page of the jobs in ``state``, shard after shard (a name's: its shard's)."""
        if name is not None:
            return self.by_name(name, JobOps.jobs, state, name, cursor, limit)
        return self.paged(JobPage, cursor, limit, JobOps.jobs, state, None)


def name_of(job: Job) -> str:
    """The name of a job to push (its shard's key)."""
    return job.name


def outcome_name(outcome: tuple[LeasedJob, JobOutcome | None]) -> str:
    """The name of the job an outcome is for (its shard's key)."""
    return outcome[0].name


def merge_constraints(parts: list[list[ConstraintStatus]], /) -> list[ConstraintStatus]:
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
