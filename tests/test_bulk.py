"""Bulk operations by state, tenant, name and age (FairQueue.bulk, ``fairque bulk``, the
Web UI's /ui/api/bulk): a count first, bounded batches, and a run that can be repeated."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from litestar.testing import TestClient
from typer.testing import CliRunner

from fairque import FairQueue, InvalidInput, QueueSettings, ShardedQueue, Task, TaskState
from fairque.cli import app
from fairque.http.master import MasterConfig, create_master
from fairque.queue import BulkAction, BulkBatch, Selector
from tests.conftest import Server, namespace_keys

runner = CliRunner()
JSON = "application/json"


def _run(
    queue: FairQueue | ShardedQueue,
    action: str,
    selector: Selector,
    *,
    dry_run: bool = False,
    batch: int = 500,
) -> tuple[int, list[BulkBatch]]:
    """Every batch of an operation: how many tasks it selected, and the batches."""
    batches: list[BulkBatch] = []
    cursor: str | None = ""
    while cursor is not None:
        done = queue.bulk(action, selector, cursor, dry_run=dry_run, batch=batch)
        batches.append(done)
        cursor = done.cursor
        assert len(batches) < 100, "the operation never ended"
    return sum(done.selected for done in batches), batches


def _fail_all(queue: FairQueue) -> None:
    while leased := queue.pop(count=100):
        for task in leased:
            queue.fail(task, "broken", retry=False)


def test_retry_counts_first_works_in_batches_and_runs_again_to_no_effect(
    queue: FairQueue,
) -> None:
    queue.push_many([Task(user_id="alice", name="report", task_id=f"a{n}") for n in range(7)])
    queue.push_many([Task(user_id="alice", name="mail", task_id="am")])
    queue.push_many([Task(user_id="bob", name="report", task_id=f"b{n}") for n in range(3)])
    _fail_all(queue)
    selector = Selector(user_id="alice", name="report")
    before = namespace_keys(queue.redis, queue.namespace.name)

    assert _run(queue, "retry", selector, dry_run=True)[0] == 7
    assert namespace_keys(queue.redis, queue.namespace.name) == before

    retried, batches = _run(queue, "retry", selector, batch=2)
    assert retried == 7
    assert max(done.looked for done in batches) == 2  # no batch looked further
    assert all(done.state is TaskState.FAILED for done in batches)
    assert {t.task_id for t in queue.tasks("queued", "alice", limit=100).tasks} == {
        f"a{n}" for n in range(7)
    }
    assert queue.stats().states[TaskState.FAILED] == 4  # alice's mail and bob's tasks
    assert _run(queue, "retry", selector)[0] == 0


def test_cancel_empties_a_tenants_backlog_with_dependents(queue: FairQueue) -> None:
    parent = queue.push(Task(user_id="alice", task_id="parent"))
    queue.push(Task(user_id="alice", task_id="child", depends_on=(parent,)))
    queue.push(Task(user_id="alice", task_id="later", delay=3600))
    queue.push_many([Task(user_id="alice", task_id=f"q{n}") for n in range(5)])
    queue.push(Task(user_id="bob", task_id="bob"))

    assert _run(queue, "cancel", Selector(user_id="alice"), dry_run=True)[0] == 8
    canceled, batches = _run(queue, "cancel", Selector(user_id="alice"), batch=3)
    assert canceled == 8  # scheduled, deferred (the child), then queued tasks
    assert [done.state for done in batches[:2]] == [TaskState.SCHEDULED, TaskState.DEFERRED]
    for task_id in ("parent", "child", "later", "q4"):
        info = queue.get(task_id)
        assert info is not None, task_id
        assert info.state is TaskState.CANCELED, task_id
    assert queue.tenant_stats("alice").queued == 0
    assert queue.tasks("queued", "bob").tasks[0].task_id == "bob"


def test_delete_ended_tasks_older_than_an_age(queue: FairQueue) -> None:
    queue.push_many([Task(user_id="alice", task_id=f"f{n}", keep_result=True) for n in range(3)])
    for task in queue.pop(count=3):
        queue.finish(task, {"n": 1})

    assert _run(queue, "delete", Selector(older_than=3600))[0] == 0
    assert _run(queue, "delete", Selector(TaskState.FINISHED))[0] == 3
    assert queue.get("f0") is None
    assert queue.tasks("finished").tasks == []


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (("retry", Selector(TaskState.QUEUED), "", 500), "state"),
        (("cancel", Selector(TaskState.QUEUED), "", 500), "user_id"),
        (("cancel", Selector(TaskState.SCHEDULED), "9.0", 500), "cursor"),
        (("delete", Selector(), "", 0), "batch"),
        (("purge", Selector(), "", 500), "action"),
    ],
)
def test_bad_bulk_input_names_the_field_and_changes_nothing(
    queue: FairQueue, call: tuple[str, Selector, str, int], field: str
) -> None:
    queue.push(Task(user_id="alice"))
    before = namespace_keys(queue.redis, queue.namespace.name)
    action, selector, cursor, batch = call
    with pytest.raises(InvalidInput) as caught:
        queue.bulk(action, selector, cursor, batch=batch)
    assert caught.value.field == field
    assert namespace_keys(queue.redis, queue.namespace.name) == before


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"state": "done"}, "state"),
        ({"user_id": ""}, "user_id"),
        ({"older_than": -1}, "older_than"),
        ({"older_than": float("nan")}, "older_than"),
    ],
)
def test_a_selector_bounds_its_fields(fields: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        Selector(**fields)  # type: ignore[arg-type]
    assert caught.value.field == field


@pytest.mark.cluster
def test_a_bulk_operation_covers_every_shard(server: Server, namespace: str) -> None:
    queue = ShardedQueue(server.url, namespace, shards=3)
    try:
        tenants = [f"t{n}" for n in range(12)]
        queue.push_many([Task(user_id=tenant, task_id=tenant) for tenant in tenants])
        for shard in queue.shards:
            _fail_all(shard)
        assert _run(queue, BulkAction.RETRY, Selector(), dry_run=True)[0] == 12
        assert _run(queue, BulkAction.RETRY, Selector())[0] == 12
        assert queue.stats().states[TaskState.QUEUED] == 12
        assert _run(queue, BulkAction.CANCEL, Selector(user_id="t3"))[0] == 1
    finally:
        queue.close()


def test_a_filtered_list_fills_its_pages(make_queue: Callable[..., FairQueue]) -> None:
    queue = make_queue(QueueSettings())
    queue.push_many([Task(user_id="bob") for _ in range(1000)])
    queue.push_many([Task(user_id="alice", task_id=f"a{n}") for n in range(2)])
    _fail_all(queue)

    page = queue.tasks("failed", "alice", limit=50)
    assert sorted(task.task_id for task in page.tasks) == ["a0", "a1"]
    assert page.cursor == 0  # one page, not 21 mostly empty ones
    seen: list[str] = []
    cursor = 0
    for _ in range(20):  # full pages, each going on where the last one stopped
        page = queue.tasks("failed", "bob", cursor=cursor, limit=50)
        assert len(page.tasks) == 50
        seen += [task.task_id for task in page.tasks]
        cursor = page.cursor
    assert len(set(seen)) == 1000


@pytest.mark.one_engine
def test_the_cli_counts_first_then_retries_and_a_second_run_finds_nothing(
    queue: FairQueue, server: Server
) -> None:
    queue.push_many([Task(user_id="alice", name="report") for _ in range(5)])
    queue.push(Task(user_id="bob", name="report"))
    _fail_all(queue)
    where = ["--url", server.url, "--namespace", queue.namespace.name]
    retry = ["bulk", "retry", "--tenant", "alice", "--batch", "2", *where]

    counted = runner.invoke(app, [*retry, "--dry-run"])
    assert (counted.exit_code, counted.stdout) == (0, "would retry 5 tasks (looked at 6 entries)\n")
    assert queue.stats().states[TaskState.FAILED] == 6
    done = runner.invoke(app, retry)
    assert (done.exit_code, done.stdout.split()[:3]) == (0, ["retried", "5", "tasks"])
    assert queue.stats().states[TaskState.QUEUED] == 5
    again = runner.invoke(app, [*retry, "--json"])
    assert json.loads(again.stdout)["selected"] == 0

    # Without a tenant, queued tasks are canceled tenant after tenant, by name here.
    queue.push_many([Task(user_id=t, name=n) for t in ("carol", "dave") for n in ("a", "b")])
    cancel = ["bulk", "cancel", "--state", "queued", "--name", "a", *where]
    counted = runner.invoke(app, [*cancel, "--dry-run"])
    assert (counted.exit_code, counted.stdout.split()[:3]) == (0, ["would", "cancel", "2"])
    canceled = runner.invoke(app, [*cancel, "--json"])
    assert json.loads(canceled.stdout)["selected"] == 2
    left = {(t.user_id, t.name) for t in queue.tasks("queued", limit=100).tasks}
    assert ("carol", "a") not in left
    assert {("carol", "b"), ("dave", "b")} <= left
    everything = runner.invoke(app, ["bulk", "cancel", "--json", *where])  # every waiting one
    assert json.loads(everything.stdout)["selected"] == 5 + 2  # alice's retried ones too
    assert queue.stats().states.get(TaskState.QUEUED, 0) == 0
    age = runner.invoke(app, [*retry, "--older-than", "7 weeks"])
    assert (age.exit_code, age.stdout) == (2, "")


@pytest.mark.one_engine
def test_the_http_api_goes_batch_by_batch_with_a_cursor(server: Server, queue: FairQueue) -> None:
    queue.push_many([Task(user_id="alice", task_id=f"a{n}", delay=3600) for n in range(3)])
    config = MasterConfig(url=server.url, namespace=queue.namespace.name, poll=0.05)
    with TestClient(create_master(config)) as client:

        def batch(body: dict[str, Any], status: int = 200, action: str = "cancel") -> Any:
            answer = client.post(f"/ui/api/bulk/{action}", json=body, headers={"accept": JSON})
            assert answer.status_code == status, answer.text
            return answer.json()

        selector = {"state": "scheduled", "user_id": "alice", "batch": 2}
        counted = batch({**selector, "dry_run": True})
        assert (counted["selected"], counted["looked"]) == (2, 2)
        assert batch({**selector, "dry_run": True, "cursor": counted["cursor"]})["cursor"] is None
        canceled, cursor = 0, ""
        while cursor is not None:
            answer = batch({**selector, "cursor": cursor})
            canceled, cursor = canceled + answer["selected"], answer["cursor"]
        assert canceled == 3
        assert queue.stats().states[TaskState.CANCELED] == 3
        assert batch({**selector, "batch": 5000}, 400)["field"] == "batch"
        assert batch({"state": "finished"}, 400)["field"] == "state"
        assert batch({"state": "finished"}, action="delete")["cursor"] is None
        assert batch({"cursor": "7.0.0"}, action="retry")["cursor"] is None  # past the end


@pytest.mark.parametrize("state", [TaskState.DEFERRED, TaskState.SCHEDULED])
def test_a_cursor_past_the_end_ends_the_operation(queue: FairQueue, state: TaskState) -> None:
    queue.push(Task(user_id="alice", delay=60))
    done = queue.bulk("cancel", Selector(state), "0.9999999999999999999.0")
    assert (done.cursor, done.selected) == (None, 0)
    assert queue.stats().states[TaskState.SCHEDULED] == 1
