"""Strict-policy jobs: the smallest int32 priority first, with constraints.

:class:`JobQueue` and :class:`AsyncJobQueue` send the calls of
:class:`~fairque.jobs.ops.JobOps`; the JQ master (:mod:`fairque.http`) serves them over
HTTP to pushers and workers in any language.
"""

from fairque.jobs.async_client import AsyncJobQueue
from fairque.jobs.client import JobQueue
from fairque.jobs.models import (
    Constraint,
    ConstraintStatus,
    Failure,
    Job,
    JobInfo,
    JobOutcome,
    JobPage,
    JobSummary,
    LeasedJob,
    Matcher,
    Success,
    failure,
)
from fairque.jobs.ops import JobOps

__all__ = [
    "AsyncJobQueue",
    "Constraint",
    "ConstraintStatus",
    "Failure",
    "Job",
    "JobInfo",
    "JobOps",
    "JobOutcome",
    "JobPage",
    "JobQueue",
    "JobSummary",
    "LeasedJob",
    "Matcher",
    "Success",
    "failure",
]
