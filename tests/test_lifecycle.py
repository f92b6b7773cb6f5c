"""Leases, retries with backoff, cancel, results, TTLs and stats on real servers."""

from __future__ import annotations

import string
from collections.abc import Callable
from datetime import timedelta

import pytest

from fairque import (
    FairQueue,
    LeasedTask,
    LeaseLost,
    Priority,
    QueueSettings,
    Task,
    TaskNotFound,
    TaskState,
)
from fairque.engine import scripts
from fairque.engine.calls import new_ids
from tests.conftest import wait_for

pytestmark = pytest.mark.cluster


def server_now(queue: FairQueue) -> float:
    seconds, micros = queue.redis.time()
    return seconds + micros / 1_000_000


def pop_one(queue: FairQueue, **kwargs: object) -> LeasedTask:
    tasks = queue.pop(**kwargs)  # type: ignore[arg-type]
    assert len(tasks) == 1
    return tasks[0]


def state_of(queue: FairQueue, task_id: str) -> TaskState:
    info = queue.get(task_id)
    assert info is not None
    return info.state


def test_generated_ids_are_short_url_safe_and_never_look_like_an_option(
    queue: FairQueue,
) -> None:
    # 120 random bits in 20 characters of URL-safe base64: shorter keys and queue
    # entries than 32 hex digits. None begins with "-" (a command line's option).
    ids = new_ids(20_000)
    assert len(set(ids)) == 20_000
    assert {len(task_id) for task_id in ids} == {20}
    assert set("".join(ids)) <= set(string.ascii_letters + string.digits + "-_")
    assert not any(task_id.startswith("-") for task_id in ids)
    pushed = queue.push_many([Task(user_id="u") for _ in range(3)])
    assert [len(task_id) for task_id in pushed] == [20, 20, 20]
    assert [task.task_id for task in queue.pop(count=3)] == pushed


def test_leased_task_carries_what_a_worker_needs(queue: FairQueue) -> None:
    before = server_now(queue)
    task_id = queue.push(Task(user_id="u", priority=Priority.HIGH, payload={"n": [1, 2]},
                              name="report", timeout=30, max_retries=None))  # fmt: skip
    leased = pop_one(queue, worker_id="w1")
    assert (leased.task_id, leased.user_id, leased.priority) == (task_id, "u", Priority.HIGH)
    assert (leased.name, leased.payload, leased.attempts) == ("report", {"n": [1, 2]}, 0)
    assert leased.max_retries is None
    assert leased.prev_start_time is None
    assert before <= leased.created_at <= leased.start_time
    assert 29 < leased.lease_deadline - server_now(queue) <= 30
    info = queue.get(task_id)
    assert info is not None
    assert (info.state, info.worker_id) == (TaskState.STARTED, "w1")
    assert info.lease_deadline == leased.lease_deadline
    assert info.lease_token == leased.lease_token


def test_finish_keeps_the_result_when_asked(queue: FairQueue) -> None:
    kept = queue.push(Task(user_id="u", payload=1, keep_result=True))
    dropped = queue.push(Task(user_id="u", payload=2))
    for task in queue.pop(count=2):
        queue.finish(task, result={"double": task.payload * 2})
    kept_info, dropped_info = queue.get(kept), queue.get(dropped)
    assert kept_info is not None
    assert dropped_info is not None
    assert (kept_info.state, kept_info.result, kept_info.has_result) == (
        TaskState.FINISHED, {"double": 2}, True)  # fmt: skip
    assert (dropped_info.result, dropped_info.has_result) == (None, False)
    assert kept_info.finished_at is not None
    assert kept_info.lease_deadline is None
    ttl = queue.redis.ttl(f"{queue.namespace.prefix}task:{kept}")
    assert 24 * 3600 - 5 < ttl <= 24 * 3600


def test_finishing_no_task_changes_nothing(queue: FairQueue) -> None:
    queue.push(Task(user_id="u"))
    before = queue.stats().counters
    assert queue.finish_many([], []) == []
    assert queue.stats().counters == before


def test_an_expired_lease_brings_the_task_back_with_attempts_plus_one(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="u", payload="x"))
    first = pop_one(queue, lease_seconds=0.05)
    again = wait_for(queue.pop, timeout=5)[0]
    assert again.task_id == task_id
    assert again.attempts == 1
    assert again.prev_start_time == first.start_time
    assert again.start_time > first.start_time
    assert again.lease_token != first.lease_token
    info = queue.get(task_id)
    assert info is not None
    assert info.last_error == "lease expired"
    assert queue.stats().counters["expired"] == 1


def test_a_stale_holder_cannot_finish_fail_or_extend(queue: FairQueue) -> None:
    queue.push(Task(user_id="u", payload="x"))
    stale = pop_one(queue, lease_seconds=0.05)
    holder = wait_for(queue.pop, timeout=5)[0]
    with pytest.raises(LeaseLost):
        queue.finish(stale, result="stale")
    with pytest.raises(LeaseLost):
        queue.fail(stale, "stale")
    with pytest.raises(LeaseLost):
        queue.extend(stale, 10)
    assert queue.finish_many([stale, holder]) == [stale.task_id]
    assert state_of(queue, holder.task_id) is TaskState.FINISHED
    with pytest.raises(LeaseLost):
        queue.finish(holder)


def test_extend_moves_the_deadline_and_keeps_the_task(queue: FairQueue) -> None:
    queue.push(Task(user_id="u", payload="x"))
    leased = pop_one(queue, lease_seconds=0.2)
    deadline = queue.extend(leased, 60)
    assert deadline == leased.lease_deadline
    assert 59 < deadline - server_now(queue) <= 60
    assert queue.reap().expired == 0
    assert queue.pop() == []


def test_reap_returns_expired_leases_without_a_pop(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="u", payload="x"))
    pop_one(queue, lease_seconds=0.02)
    wait_for(lambda: queue.reap().expired, timeout=5)
    assert state_of(queue, task_id) is TaskState.QUEUED
    assert queue.stats().tenants["u"].queued == 1


def test_expired_leases_use_up_retries(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="u", payload="poison", max_retries=1))
    pop_one(queue, lease_seconds=0.02)
    wait_for(lambda: queue.pop(lease_seconds=0.02), timeout=5)
    wait_for(lambda: queue.reap().expired, timeout=5)
    info = queue.get(task_id)
    assert info is not None
    assert (info.state, info.attempts, info.last_error) == (TaskState.FAILED, 2, "lease expired")


def test_retries_back_off_exponentially_then_fail(make_queue: Callable[..., FairQueue]) -> None:
    queue = make_queue(QueueSettings(retry_backoff_base=0.05))
    task_id = queue.push(Task(user_id="u", payload="flaky", max_retries=3))
    for attempt in range(3):
        leased = wait_for(queue.pop, timeout=5)[0]
        assert leased.attempts == attempt
        # The server's clock on both sides of the call: it failed the task in between,
        # however long the round trips took.
        before = server_now(queue)
        assert queue.fail(leased, f"boom {attempt}") is TaskState.SCHEDULED
        after = server_now(queue)
        info = queue.get(task_id)
        assert info is not None
        assert info.execute_after is not None
        backoff = 0.05 * 2**attempt
        assert before + backoff - 0.001 <= info.execute_after <= after + backoff + 0.001
    last = wait_for(queue.pop, timeout=5)[0]
    assert last.attempts == 3
    assert queue.fail(last, "final") is TaskState.FAILED
    info = queue.get(task_id)
    assert info is not None
    assert (info.state, info.attempts, info.last_error) == (TaskState.FAILED, 4, "final")
    ttl = queue.redis.ttl(f"{queue.namespace.prefix}task:{task_id}")
    assert 7 * 24 * 3600 - 5 < ttl <= 7 * 24 * 3600
    stats = queue.stats()
    assert (stats.counters["retried"], stats.counters["failed"]) == (3, 1)
    assert stats.states[TaskState.FAILED] == 1


def test_default_backoff_starts_at_one_second(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="u", payload="x"))
    leased = pop_one(queue)
    before = server_now(queue)
    queue.fail(leased, "boom")
    after = server_now(queue)
    info = queue.get(task_id)
    assert info is not None
    assert info.execute_after is not None
    assert before + 1 - 0.001 <= info.execute_after <= after + 1 + 0.001


def test_backoff_is_capped(make_queue: Callable[..., FairQueue]) -> None:
    queue = make_queue(QueueSettings(retry_backoff_base=100, retry_backoff_max=0.05))
    task_id = queue.push(Task(user_id="u", payload="x"))
    queue.fail(pop_one(queue), "boom")
    assert wait_for(queue.pop, timeout=5)[0].task_id == task_id


def test_fail_without_retry_is_final(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="u", payload="x"))
    assert queue.fail(pop_one(queue), "bad input", retry=False) is TaskState.FAILED
    assert state_of(queue, task_id) is TaskState.FAILED


def test_a_ttl_of_zero_discards_ended_tasks(make_queue: Callable[..., FairQueue]) -> None:
    queue = make_queue(QueueSettings(finished_ttl=0, failed_ttl=0))
    done = queue.push(Task(user_id="u", payload=1, keep_result=True))
    lost = queue.push(Task(user_id="u", payload=2, max_retries=0))
    first, second = queue.pop(count=2)
    queue.finish(first, result="r")
    queue.fail(second, "x")
    assert queue.get(done) is None
    assert queue.get(lost) is None
    assert queue.stats().counters["finished"] == 1


def test_unlimited_retries(make_queue: Callable[..., FairQueue]) -> None:
    queue = make_queue(QueueSettings(retry_backoff_base=0.001))
    queue.push(Task(user_id="u", payload="x", max_retries=None))
    for attempt in range(6):
        leased = wait_for(queue.pop, timeout=5)[0]
        assert leased.attempts == attempt
        assert queue.fail(leased, "again") is TaskState.SCHEDULED


def test_next_due_covers_scheduled_tasks_and_leases(queue: FairQueue) -> None:
    assert queue.next_due() is None
    queue.push(Task(user_id="u", payload="x", delay=timedelta(hours=1)))
    due = queue.next_due()
    assert due is not None
    assert 3599 < due <= 3600
    queue.push(Task(user_id="u", payload="y"))
    queue.pop(lease_seconds=60)
    due = queue.next_due()
    assert due is not None
    assert 59 < due <= 60


def test_scheduled_tasks_are_promoted_when_due(queue: FairQueue) -> None:
    assert queue.next_due() is None
    task_id = queue.push(Task(user_id="u", payload="x", delay=timedelta(milliseconds=50)))
    assert state_of(queue, task_id) is TaskState.SCHEDULED
    due = queue.next_due()
    assert due is not None
    assert 0 <= due <= 0.05
    assert wait_for(queue.promote, timeout=5) == 1
    info = queue.get(task_id)
    assert info is not None
    assert info.state is TaskState.QUEUED
    assert info.start_time == info.execute_after
    assert pop_one(queue).task_id == task_id


def test_cancel_by_state(queue: FairQueue) -> None:
    queued = queue.push(Task(user_id="u", payload="q"))
    critical = queue.push(Task(user_id="u", priority=Priority.CRITICAL, payload="c"))
    scheduled = queue.push(Task(user_id="u", payload="s", delay=timedelta(hours=1)))
    running = queue.push(Task(user_id="v", payload="r"))
    assert pop_one(queue, assigned_users=["v"]).task_id == running
    assert queue.cancel(queued) is True
    assert queue.cancel(critical) is True
    assert queue.cancel(scheduled) is True
    assert queue.cancel(running) is True  # aborted: tests/test_abort.py
    assert queue.cancel(queued) is False
    assert queue.cancel(running) is False
    for task_id in (queued, critical, scheduled, running):
        info = queue.get(task_id)
        assert info is not None
        assert (info.state, info.last_error) == (TaskState.CANCELED, "canceled")
    assert queue.pop() == []
    stats = queue.stats()
    assert stats.states[TaskState.CANCELED] == 4
    assert stats.states[TaskState.STARTED] == 0
    assert stats.states[TaskState.QUEUED] == 0
    assert "u" not in stats.tenants or stats.tenants["u"].queued == 0
    with pytest.raises(TaskNotFound):
        queue.cancel("no-such-task")


def test_cancel_leaves_other_tasks_of_the_tenant_ready(queue: FairQueue) -> None:
    keep = queue.push(Task(user_id="u", payload="keep"))
    drop = queue.push(Task(user_id="u", payload="drop"))
    assert queue.cancel(drop)
    assert [task.task_id for task in queue.pop(count=5)] == [keep]


def test_get_unknown_task_is_none(queue: FairQueue) -> None:
    assert queue.get("missing") is None


def test_stats_per_state_and_tenant(queue: FairQueue) -> None:
    queue.push_many([Task(user_id="a", payload=i) for i in range(3)])
    queue.push_many([Task(user_id="b", payload=i) for i in range(2)])
    queue.push(Task(user_id="b", payload="later", delay=timedelta(hours=1)))
    first, second = queue.pop(count=2)
    queue.finish(first)
    queue.fail(second, "x", retry=False)
    stats = queue.stats()
    assert stats.states == {
        TaskState.QUEUED: 3,
        TaskState.SCHEDULED: 1,
        TaskState.STARTED: 0,
        TaskState.DEFERRED: 0,
        TaskState.FINISHED: 1,
        TaskState.FAILED: 1,
        TaskState.CANCELED: 0,
    }
    assert stats.counters == {"pushed": 6, "started": 2, "finished": 1, "failed": 1}
    assert (stats.tenants["a"].queued, stats.tenants["a"].pushed) == (2, 3)
    assert (stats.tenants["b"].queued, stats.tenants["b"].pushed) == (1, 3)
    assert stats.tenants["a"].finished + stats.tenants["b"].finished == 1


def test_reap_drops_expired_registry_entries(make_queue: Callable[..., FairQueue]) -> None:
    queue = make_queue(QueueSettings(finished_ttl=0.05))
    queue.push(Task(user_id="u", payload="x"))
    queue.finish(pop_one(queue))
    assert wait_for(lambda: queue.reap().dropped, timeout=5) == 1
    assert queue.stats().states[TaskState.FINISHED] == 0


def test_scripts_are_loaded_again_after_a_function_flush(queue: FairQueue) -> None:
    queue.push(Task(user_id="u", payload="x"))
    queue.redis.function_flush()
    assert pop_one(queue).payload == "x"
    # Each script's library is loaded when it is first called: pop's, not push's.
    listed = queue.redis.function_list()
    per_node = listed.values() if isinstance(listed, dict) else [listed]  # a cluster's
    loaded = {library[1].decode() for libraries in per_node for library in libraries}
    assert scripts.load("queue/pop").function in loaded
    assert scripts.load("queue/push").function not in loaded


def test_release_hands_tasks_back_at_once_in_their_place(queue: FairQueue) -> None:
    normal = queue.push_many([Task(user_id="u", payload=i) for i in range(3)])
    critical = queue.push(Task(user_id="u", priority=Priority.CRITICAL, payload="c"))
    held = queue.pop(count=2)
    assert [task.task_id for task in held] == [critical, normal[0]]
    assert queue.release(held) == []
    assert queue.release(held) == [critical, normal[0]]  # no longer held
    again = queue.pop(count=4)
    assert [task.task_id for task in again] == [critical, *normal]
    assert [task.attempts for task in again] == [0, 0, 0, 0]
    assert queue.stats().counters["released"] == 2


def test_tasks_becoming_ready_wake_idle_workers(queue: FairQueue) -> None:
    listener = queue.redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    listener.ssubscribe(queue.namespace.wake_channel)
    wait_for(lambda: listener.get_sharded_message(timeout=0.01) is None and listener.subscribed)
    queue.push(Task(user_id="u", payload="wake up", delay=timedelta(hours=1)))
    assert listener.get_sharded_message(timeout=0.2) is None  # nothing ready yet
    queue.push_many([Task(user_id="a"), Task(user_id="b", name="render")])
    # One message per lane where a tenant may now be served, naming it ('' for unnamed tasks).
    messages = [wait_for(lambda: listener.get_sharded_message(timeout=0.1), timeout=5)]
    messages.append(wait_for(lambda: listener.get_sharded_message(timeout=0.1), timeout=5))
    channel = queue.namespace.wake_channel.encode()
    assert {(message["channel"], message["data"]) for message in messages} == {
        (channel, b""),
        (channel, b"render"),
    }
    assert listener.get_sharded_message(timeout=0.1) is None
    listener.close()
