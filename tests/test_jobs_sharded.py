"""Strict-policy jobs over the shards of one job queue (``JobQueue(..., shards=N)``, the
JQ master's ``--shards``): a job's name picks its shard, so each name keeps its strict
order and a constraint by name stays exact; calls by id find the job's shard; lists and
constraints cover every shard."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from fairque import QueueSettings, TaskState
from fairque.engine.shards import shard_index
from fairque.jobs import Constraint, Job, Matcher, Success, failure
from fairque.jobs.client import JobQueue
from fairque.servers.embedded import LocalServer

pytestmark = pytest.mark.cluster

SHARDS = 3
# Names on every shard (CRC-32 modulo 3): a0 and a1 on different shards, and so on.
NAMES = ["resize", "thumb", "mail", "report", "index", "crawl"]


@pytest.fixture
def jobs(server: LocalServer, namespace: str) -> Iterator[JobQueue]:
    settings = QueueSettings(retry_backoff_base=0.01, retry_backoff_max=0.01)
    with JobQueue(server.url, namespace, shards=SHARDS, settings=settings) as queue:
        yield queue


def done(result: object = None) -> Success:
    return Success(finished_at=datetime.now(timezone.utc), result=result)


def test_the_names_used_here_spread_over_every_shard() -> None:
    assert {shard_index(name, SHARDS) for name in NAMES} == set(range(SHARDS))


def test_jobs_go_to_their_names_shards_and_keep_their_order(jobs: JobQueue) -> None:
    pushed = jobs.push_many([Job(name=name, priority=-p) for p in range(4) for name in NAMES])
    for name in NAMES:  # each shard holds its names' jobs, and no other
        holder = jobs.plans.namespaces[shard_index(name, SHARDS)]
        shard = JobQueue(namespace=holder.name, executor=jobs.executor)
        assert {job.name for job in shard.jobs("queued", limit=100).jobs} == {
            other for other in NAMES if shard_index(other, SHARDS) == shard_index(name, SHARDS)
        }
    # A name's jobs come in its strict order (the lowest priority first).
    leased = jobs.pop("w", 10, ["thumb"])
    assert [job.priority for job in leased] == [-3, -2, -1, 0]
    everything = [job for _ in range(len(pushed)) for job in jobs.pop("w", 5)]
    assert len(everything) == len(pushed) - 4
    assert jobs.pop("w", 5) == []
    states = jobs.complete_many([(job, done(job.id)) for job in [*leased, *everything]])
    assert states == [TaskState.FINISHED] * len(pushed)


def test_calls_by_id_find_the_jobs_shard(jobs: JobQueue) -> None:
    kept, failing, waiting = (
        jobs.push(Job(name="resize", keep_result=True)),
        jobs.push(Job(name="mail")),
        jobs.push(Job(name="crawl")),
    )
    assert jobs.cancel(waiting)
    leased = {job.id: job for job in jobs.pop("w", 10)}
    assert set(leased) == {kept, failing}
    for job in leased.values():
        assert jobs.report(job.id, job.lease_token, 1, job.name, [job.name]) == 1
        info = jobs.get(job.id)
        assert info is not None
        assert info.progress_message == job.name
    assert jobs.complete(leased[kept], done({"ok": 1})) is TaskState.FINISHED
    assert jobs.complete(leased[failing], failure("other", "no", False)) is TaskState.FAILED
    assert jobs.result(kept)["result"] == {"ok": 1}
    assert jobs.result(kept) is None  # once
    assert jobs.retry(failing)
    assert [job.id for job in jobs.pop("w", 10)] == [failing]


def test_pages_fill_up_across_shards(jobs: JobQueue) -> None:
    ids = set(jobs.push_many([Job(name=name) for name in NAMES for _ in range(3)]))
    seen: list[str] = []
    cursor = 0
    for _ in range(10):  # bounded: 18 jobs in pages of 7
        page = jobs.jobs("queued", cursor=cursor, limit=7)
        assert len(page.jobs) == 7 or page.cursor == 0
        seen += [job.id for job in page.jobs]
        cursor = page.cursor
        if not cursor:
            break
    assert sorted(seen) == sorted(ids)
    assert [job.name for job in jobs.jobs("queued", "mail").jobs] == ["mail"] * 3


def test_a_constraint_by_name_is_exact_and_statuses_add_up(jobs: JobQueue) -> None:
    by_name = Constraint(match=[Matcher(field="name", op="equals", value="resize")],
                         concurrency=1)  # fmt: skip
    assert jobs.set_constraint("one-resize", by_name) == 0
    jobs.push_many([Job(name="resize") for _ in range(3)] + [Job(name="mail")])
    leased = jobs.pop("w", 10)
    assert sorted(job.name for job in leased) == ["mail", "resize"]
    [status] = jobs.constraints()
    assert (status.id, status.running) == ("one-resize", 1)
    jobs.delete_constraint("one-resize")
    assert jobs.constraints() == []
    assert [job.name for job in jobs.pop("w", 10)] == ["resize", "resize"]
