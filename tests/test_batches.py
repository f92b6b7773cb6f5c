"""Calls of concurrent requests sent together (fairque.jobs.batching), against a real server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timezone

import pytest

from fairque import QueueSettings
from fairque.engine.records import TaskState
from fairque.errors import FairQueueError, InvalidInput, LeaseLost
from fairque.jobs import Job, JobOutcome, LeasedJob, Success
from fairque.jobs.async_client import AsyncJobQueue
from fairque.jobs.batching import completions
from fairque.jobs.batching import pushes as batched_pushes
from fairque.queue import AsyncFairQueue
from tests.conftest import Server

pytestmark = pytest.mark.cluster


class CountingJobs(AsyncJobQueue):
    """An :class:`AsyncJobQueue` that counts its script calls for pushes."""

    calls = 0

    async def push_many(self, jobs: Sequence[Job]) -> list[str]:
        self.calls += 1
        return await super().push_many(jobs)

    async def complete_many(
        self, outcomes: Sequence[tuple[LeasedJob, JobOutcome | None]]
    ) -> list[TaskState | FairQueueError]:
        self.calls += 1
        return await super().complete_many(outcomes)


@pytest.fixture
async def jobs(server: Server, namespace: str) -> AsyncIterator[CountingJobs]:
    queue = AsyncFairQueue(server.url, namespace, settings=QueueSettings(max_payload_bytes=100))
    yield CountingJobs(queue)
    await queue.close()


async def test_pushes_that_arrive_together_share_a_call(jobs: CountingJobs) -> None:
    pushes = batched_pushes(jobs)
    ids = await asyncio.gather(*(pushes(Job(name=f"job{i}", priority=i)) for i in range(50)))
    assert jobs.calls == 1
    assert len(set(ids)) == 50
    for i, job_id in enumerate(ids):  # each request got the id of its own job
        info = await jobs.get(job_id)
        assert info is not None
        assert (info.name, info.priority) == (f"job{i}", i)


async def test_a_batch_is_never_larger_than_its_bound(jobs: CountingJobs) -> None:
    pushes = batched_pushes(jobs, size=4)
    ids = await asyncio.gather(*(pushes(Job(name="a")) for _ in range(10)))
    assert jobs.calls == 3
    assert len(set(ids)) == 10


async def test_one_refused_job_leaves_the_others_stored(jobs: CountingJobs) -> None:
    pushes = batched_pushes(jobs)
    sent = [Job(name=f"job{i}", argument="x" * (500 if i == 2 else 1)) for i in range(5)]
    outcomes = await asyncio.gather(*(pushes(job) for job in sent), return_exceptions=True)
    refused = outcomes.pop(2)
    # The error it would have had alone: the field is not the batch's "[2].argument".
    assert isinstance(refused, InvalidInput)
    assert refused.field == "argument"
    for job, job_id in zip(sent[:2] + sent[3:], outcomes, strict=True):
        assert isinstance(job_id, str)
        info = await jobs.get(job_id)
        assert info is not None
        assert info.name == job.name
    page = await jobs.jobs("queued")
    assert len(page.jobs) == 4


async def test_a_lone_push_is_sent_at_once(jobs: CountingJobs) -> None:
    pushes = batched_pushes(jobs)
    first = await pushes(Job(name="a"))
    second = await pushes(Job(name="b"))
    assert jobs.calls == 2
    assert first != second


async def test_results_that_arrive_together_share_a_call_and_keep_their_outcomes(
    jobs: CountingJobs,
) -> None:
    for i in range(4):
        await jobs.push(Job(name=f"job{i}", keep_result=True))
    leased = await jobs.pop("w", 4)
    leased[1].lease_token = "0"  # its lease is lost: the others are recorded anyway
    calls = jobs.calls
    record = completions(jobs)
    now = datetime.now(timezone.utc)
    outcomes = await asyncio.gather(
        *(record((job, Success(finished_at=now, result=i))) for i, job in enumerate(leased[:3])),
        record((leased[3], None)),
        return_exceptions=True,
    )
    assert jobs.calls == calls + 1
    assert outcomes[0] is outcomes[2] is TaskState.FINISHED
    assert isinstance(outcomes[1], LeaseLost)
    assert outcomes[3] is TaskState.QUEUED
    assert (await jobs.result(leased[2].id))["result"] == 2
