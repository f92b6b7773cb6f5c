"""The master's single pushes sent together (fairque.http.pushes), against a real server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from fairque import QueueSettings
from fairque.errors import InvalidInput
from fairque.http.pushes import Pushes
from fairque.jobs import Job
from fairque.jobs.client import AsyncJobQueue
from fairque.queue import AsyncFairQueue
from tests.conftest import Server

pytestmark = pytest.mark.cluster


class CountingJobs(AsyncJobQueue):
    """An :class:`AsyncJobQueue` that counts its script calls for pushes."""

    calls = 0

    async def push_many(self, jobs: Sequence[Job]) -> list[str]:
        self.calls += 1
        return await super().push_many(jobs)


@pytest.fixture
async def jobs(server: Server, namespace: str) -> AsyncIterator[CountingJobs]:
    queue = AsyncFairQueue(server.url, namespace, settings=QueueSettings(max_payload_bytes=100))
    yield CountingJobs(queue)
    await queue.close()


async def test_pushes_that_arrive_together_share_a_call(jobs: CountingJobs) -> None:
    pushes = Pushes(jobs)
    ids = await asyncio.gather(*(pushes.push(Job(name=f"job{i}", priority=i)) for i in range(50)))
    assert jobs.calls == 1
    assert len(set(ids)) == 50
    for i, job_id in enumerate(ids):  # each request got the id of its own job
        info = await jobs.get(job_id)
        assert info is not None
        assert (info.name, info.priority) == (f"job{i}", i)


async def test_a_batch_is_never_larger_than_its_bound(jobs: CountingJobs) -> None:
    pushes = Pushes(jobs, batch=4)
    ids = await asyncio.gather(*(pushes.push(Job(name="a")) for _ in range(10)))
    assert jobs.calls == 3
    assert len(set(ids)) == 10


async def test_one_refused_job_leaves_the_others_stored(jobs: CountingJobs) -> None:
    pushes = Pushes(jobs)
    sent = [Job(name=f"job{i}", argument="x" * (500 if i == 2 else 1)) for i in range(5)]
    outcomes = await asyncio.gather(*(pushes.push(job) for job in sent), return_exceptions=True)
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
    pushes = Pushes(jobs)
    first = await pushes.push(Job(name="a"))
    second = await pushes.push(Job(name="b"))
    assert jobs.calls == 2
    assert first != second
