"""The pops' maintenance is skipped while ``maintenance:quiet`` lives (include/writes.lua).

The key is a promise: nothing is due before it expires. A pop that finds nothing due
sets it to expire by the earliest lease deadline, scheduled start or rate window, and a
second from now at the latest; every writer that adds one due sooner deletes it. Each
test sets the key with a pop that finds nothing, makes one kind of write, and checks the
promise against the three zsets' heads, so that a writer that forgot the key fails here
and not as a task served a second late. What a machine that stalls for the key's second
could make untrue by the time it is looked at is tried again, within wait_for's bound.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fairque import (
    FairQueue,
    Job,
    JobQueue,
    PutTaskRequest,
    QueueSettings,
    RedisStorage,
    Task,
    TaskState,
)
from fairque.queue.models import LeasedTask
from tests.conftest import Server, wait_for

pytestmark = pytest.mark.cluster

QUIET = "maintenance:quiet"
SOON = 0.3  # seconds: under the key's horizon of a second


def quiet_expiry(queue: FairQueue) -> int | None:
    """When the key expires (ms), or None if it is gone."""
    expires = int(queue.redis.pexpiretime(queue.namespace.key(QUIET)))
    assert expires != -1, "the key always has an expiry"
    return None if expires == -2 else expires


def earliest_due(queue: FairQueue) -> float | None:
    """The earliest lease deadline, scheduled start or rate window (us), if any."""
    heads = [
        queue.redis.zrange(queue.namespace.key(name), 0, 0, withscores=True)
        for name in ("leases", "scheduled", "sleeping")
    ]
    scores = [float(head[0][1]) for head in heads if head]
    return min(scores) if scores else None


def assert_promise_holds(queue: FairQueue) -> None:
    expires, due = quiet_expiry(queue), earliest_due(queue)
    if expires is not None and due is not None:
        assert expires * 1000 < due, "the key outlives something due"


def settle(queue: FairQueue) -> None:
    """Pops that serve nothing (each is assigned a tenant with no tasks) but run the
    maintenance, until the key is seen alive after one: on a machine that stalls for a
    second between the pop and the look, it expires first."""

    def pop_and_look() -> bool:
        assert queue.pop(assigned_users=["nobody"], steal_targets=[]) == []
        return quiet_expiry(queue) is not None

    wait_for(pop_and_look)
    assert_promise_holds(queue)


def lease(queue: FairQueue, **kwargs: object) -> LeasedTask:
    [leased] = queue.pop(**kwargs)  # type: ignore[arg-type]
    return leased


def test_a_pop_that_finds_nothing_due_sets_the_key_for_a_second_at_most(
    queue: FairQueue,
) -> None:
    before_ms = now_us(queue) // 1000
    settle(queue)
    expires = quiet_expiry(queue)
    assert expires is not None
    assert before_ms < expires <= now_us(queue) // 1000 + 1000


def test_the_key_expires_before_the_earliest_thing_due(queue: FairQueue) -> None:
    def expiry_by_the_head() -> bool:  # again if the task was due before the look
        queue.push(Task(user_id="u", delay=SOON))
        settle(queue)
        expires, due = quiet_expiry(queue), earliest_due(queue)
        return expires is not None and due is not None and due - 2000 < expires * 1000 < due

    wait_for(expiry_by_the_head)
    # Once it is gone, the next pop finds the task due and serves it.
    assert wait_for(queue.pop, timeout=5)[0].user_id == "u"


def test_a_pop_that_found_something_due_leaves_the_key_unset(
    make_queue: Callable[..., FairQueue],
) -> None:
    queue = make_queue(QueueSettings(maintenance_batch=1))
    queue.push_many([Task(user_id="u"), Task(user_id="v")])
    leased = queue.pop(count=2, lease_seconds=0.01)
    assert quiet_expiry(queue) is None
    wait_for(lambda: now_us(queue) / 1e6 > max(task.lease_deadline for task in leased))
    # A pop brings one lease back (the batch): it cannot tell the next is not due.
    for expired in (1, 2):
        assert queue.pop(assigned_users=["nobody"], steal_targets=[]) == []
        assert quiet_expiry(queue) is None
        assert queue.stats().counters["expired"] == expired
    settle(queue)


def now_us(queue: FairQueue) -> int:
    seconds, micros = queue.redis.time()
    return int(seconds) * 1_000_000 + int(micros)


def test_a_scheduled_push_due_soon_deletes_the_key(queue: FairQueue) -> None:
    settle(queue)
    queue.push(Task(user_id="u", delay=SOON))
    assert quiet_expiry(queue) is None

    def kept() -> bool:  # due after the key expires: it stays (again if it expired first)
        settle(queue)
        queue.push(Task(user_id="u", delay=60))
        return quiet_expiry(queue) is not None

    wait_for(kept)
    assert_promise_holds(queue)


def test_a_short_lease_deletes_the_key(queue: FairQueue) -> None:
    def kept() -> bool:  # a lease of the task's timeout (300 s) leaves the key alone
        queue.push(Task(user_id="u"))
        settle(queue)
        lease(queue, count=1)
        return quiet_expiry(queue) is not None

    wait_for(kept)
    assert_promise_holds(queue)
    queue.push(Task(user_id="v"))
    settle(queue)
    lease(queue, count=1, lease_seconds=SOON)
    assert quiet_expiry(queue) is None


def test_a_short_extension_deletes_the_key(queue: FairQueue) -> None:
    queue.push(Task(user_id="u"))
    leased = lease(queue)
    settle(queue)
    queue.extend(leased, SOON)
    assert quiet_expiry(queue) is None
    assert_promise_holds(queue)


def test_a_near_retry_deletes_the_key(make_queue: Callable[..., FairQueue]) -> None:
    queue = make_queue(QueueSettings(retry_backoff_base=SOON))
    queue.push(Task(user_id="u"))
    leased = lease(queue)
    settle(queue)
    queue.fail(leased, "again")
    assert quiet_expiry(queue) is None
    assert wait_for(queue.pop, timeout=5)[0].attempts == 1


def test_a_hand_over_deletes_the_key(queue: FairQueue) -> None:
    queue.push(Task(user_id="u", name="elsewhere"))
    leased = lease(queue)
    settle(queue)
    queue.hand_over([leased], delay=SOON)
    assert quiet_expiry(queue) is None
    assert_promise_holds(queue)


def test_a_dependent_due_soon_deletes_the_key(queue: FairQueue) -> None:
    first = queue.push(Task(user_id="u"))
    second = queue.push(Task(user_id="u", depends_on=(first,), delay=2 * SOON))
    leased = lease(queue)
    settle(queue)
    queue.finish(leased)  # the dependent is scheduled now, due within the horizon
    dependent = queue.get(second)
    assert dependent is not None
    if dependent.state is TaskState.SCHEDULED:  # else the machine stalled past its start
        assert quiet_expiry(queue) is None
    settle(queue)


def test_a_tenant_rate_window_deletes_the_key(queue: FairQueue) -> None:
    queue.set_tenant("u", rate=1, period=SOON)
    queue.push_many([Task(user_id="u") for _ in range(2)])
    settle(queue)
    lease(queue)  # its window is full: the tenant sleeps until it opens
    assert quiet_expiry(queue) is None
    assert_promise_holds(queue)
    assert wait_for(queue.pop, timeout=5)[0].user_id == "u"


def test_a_name_rate_window_deletes_the_key(queue: FairQueue) -> None:
    queue.set_limits("send", rate=1, period=SOON)
    queue.push_many([Task(user_id=f"u{i}", name="send") for i in range(2)])
    settle(queue)
    lease(queue, names=["send"])
    assert quiet_expiry(queue) is None
    settle(queue)
    assert wait_for(lambda: queue.pop(names=["send"]), timeout=5)[0].name == "send"


def test_a_short_job_lease_deletes_the_key(queue: FairQueue) -> None:
    jobs = JobQueue(queue, lease_grace=0.0)
    jobs.push(Job(name="n", timeout=SOON))
    settle(queue)
    jobs.pop("w")
    assert quiet_expiry(queue) is None


def test_a_short_storage_lease_deletes_the_key(server: Server, namespace: str) -> None:
    with RedisStorage(server.url, namespace) as storage, FairQueue(server.url, namespace) as queue:
        storage.put_task(PutTaskRequest(queue_num=1, data=b"x"))
        settle(queue)
        storage.get_task(1, 1, visibility_timeout=SOON)
        assert quiet_expiry(queue) is None
