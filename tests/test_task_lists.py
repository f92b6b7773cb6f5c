"""Task lists by state / tenant / name, and retrying every failed task of a tenant (the
engine calls behind the Web UI)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fairque import FairQueue, InvalidInput, Priority, QueueSettings, Task, TaskState
from fairque.jobs import Job
from fairque.jobs.client import JobQueue
from tests.conftest import namespace_keys


def _all_pages(
    queue: FairQueue,
    state: str,
    user_id: str | None = None,
    name: str | None = None,
    limit: int = 3,
) -> list[str]:
    ids: list[str] = []
    cursor = 0
    for _ in range(100):
        page = queue.tasks(state, user_id, name, cursor, limit)
        ids += [task.task_id for task in page.tasks]
        cursor = page.cursor
        if not cursor:
            return ids
    pytest.fail("the pages never ended")


def _fail_all(queue: FairQueue) -> None:
    for task in queue.pop(count=100):
        queue.fail(task, "<b>broken</b>", retry=False)


def test_queued_tasks_page_through_every_tenant_queue_and_strict_jobs(queue: FairQueue) -> None:
    critical = queue.push(Task(user_id="bob", priority=Priority.CRITICAL, task_id="b-crit"))
    low = queue.push(Task(user_id="bob", priority=Priority.LOWEST, task_id="b-low"))
    high = queue.push(Task(user_id="bob", priority=Priority.HIGH, task_id="b-high", name="rep"))
    alice = queue.push_many([Task(user_id="alice", task_id=f"a{n}") for n in range(4)])
    job = JobQueue(queue).push(Job(name="resize"))

    assert _all_pages(queue, "queued") == [*alice, critical, high, low, job]
    assert _all_pages(queue, "queued", user_id="bob") == [critical, high, low]
    assert _all_pages(queue, "queued", name="rep") == [high]
    assert _all_pages(queue, "queued", name="resize") == [job]
    assert _all_pages(queue, "queued", user_id="nobody") == []

    first = queue.tasks("queued", "bob", limit=1)
    assert first.cursor == 1
    (summary,) = first.tasks
    assert (summary.task_id, summary.user_id, summary.state, summary.priority) == (
        critical,
        "bob",
        "queued",
        Priority.CRITICAL,
    )
    assert summary.created_at is not None


def test_other_states_list_newest_first_with_lease_holders(queue: FairQueue) -> None:
    ids = queue.push_many([Task(user_id="u", name="n", task_id=f"t{n}") for n in range(5)])
    deferred = queue.push(Task(user_id="u", task_id="d", depends_on=(ids[0],)))
    scheduled = queue.push(Task(user_id="v", task_id="s", delay=60))
    leased = queue.pop(count=5, worker_id="w-1")

    started = queue.tasks("started", limit=10)
    assert {task.task_id for task in started.tasks} == set(ids)
    assert {task.worker_id for task in started.tasks} == {"w-1"}
    assert started.cursor == 0
    assert _all_pages(queue, TaskState.DEFERRED) == [deferred]
    assert _all_pages(queue, "scheduled", user_id="v") == [scheduled]
    assert _all_pages(queue, "scheduled", user_id="u") == []

    for task in leased[:3]:
        queue.fail(task, "no", retry=False)
    failed = _all_pages(queue, "failed", limit=2)
    assert sorted(failed) == sorted(task.task_id for task in leased[:3])
    assert _all_pages(queue, "failed", name="other") == []


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"state": "lost"}, "state"),
        ({"state": "queued", "user_id": ""}, "user_id"),
        ({"state": "queued", "name": "x" * 300}, "name"),
        ({"state": "queued", "cursor": -1}, "cursor"),
        ({"state": "queued", "limit": 0}, "limit"),
        ({"state": "queued", "limit": True}, "limit"),
    ],
)
def test_bad_list_arguments_name_the_field(
    queue: FairQueue, fields: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        queue.tasks(**fields)  # type: ignore[arg-type]
    assert caught.value.field == field


def test_retry_failed_requeues_only_that_tenant_in_slices(
    make_queue: Callable[..., FairQueue],
) -> None:
    queue = make_queue(QueueSettings(maintenance_batch=3))
    queue.push_many([Task(user_id="alice", task_id=f"a{n}") for n in range(7)])
    queue.push_many([Task(user_id="bob", task_id=f"b{n}") for n in range(4)])
    _fail_all(queue)
    assert queue.stats().states[TaskState.FAILED] == 11

    assert queue.retry_failed("alice") == 7
    assert sorted(_all_pages(queue, "queued")) == sorted(f"a{n}" for n in range(7))
    assert sorted(_all_pages(queue, "failed")) == sorted(f"b{n}" for n in range(4))
    info = queue.get("a3")
    assert info is not None
    assert (info.state, info.attempts, info.last_error) == (TaskState.QUEUED, 1, "<b>broken</b>")
    assert queue.stats().tenants["alice"].requeued == 7
    assert queue.retry_failed("alice") == 0


def test_retry_failed_refuses_a_bad_tenant_and_changes_nothing(queue: FairQueue) -> None:
    queue.push(Task(user_id="alice"))
    _fail_all(queue)
    before = namespace_keys(queue.redis, queue.namespace.name)
    with pytest.raises(InvalidInput) as caught:
        queue.retry_failed("")
    assert caught.value.field == "user_id"
    assert namespace_keys(queue.redis, queue.namespace.name) == before


def test_retry_of_one_task_still_works(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="alice"))
    _fail_all(queue)
    assert queue.retry(task_id)
    assert not queue.retry(task_id)
    assert [task.task_id for task in queue.pop()] == [task_id]
