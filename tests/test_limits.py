"""Limits per task name (design section 5): a concurrency limit, a rate limit and a paused
flag across all workers, combined with the tenants' shares: a task starts only when both
allow. Observed through pops on real servers."""

from __future__ import annotations

import pytest

from fairque import FairQueue, Task
from fairque.errors import InvalidInput
from tests.conftest import wait_for
from tests.test_lanes import register

pytestmark = pytest.mark.cluster


def push(queue: FairQueue, name: str, count: int, tenants: int = 3) -> None:
    queue.push_many([Task(user_id=f"u{n % tenants}", name=name) for n in range(count)])


def test_a_concurrency_limit_holds_a_name_across_tenants(queue: FairQueue) -> None:
    register(queue, "mail-worker", "mail")  # so that a short pop for render leaves mail alone
    limits = queue.set_limits("render", concurrency=2)
    assert (limits.name, limits.concurrency, limits.running) == ("render", 2, 0)
    push(queue, "render", 6)
    push(queue, "mail", 2)
    first = queue.pop(count=10, names=["render"])
    assert len(first) == 2
    assert {task.user_id for task in first} == {"u0", "u1"}  # fair between tenants still
    assert queue.pop(count=10, names=["render"]) == []
    assert [task.name for task in queue.pop(count=10, names=["mail"])] == ["mail", "mail"]
    assert queue.limits("render").running == 2
    queue.finish(first[0])
    assert [task.user_id for task in queue.pop(count=10, names=["render"])] == ["u2"]
    queue.fail(first[1], "no", retry=False)
    assert len(queue.pop(count=10, names=["render"])) == 1


def test_a_held_name_takes_its_wake_up_token_away_until_a_lease_ends(queue: FairQueue) -> None:
    queue.set_limits("render", concurrency=1)
    token = queue.namespace.lane_key("render", "wakeups")
    push(queue, "render", 3)
    assert queue.redis.llen(token) == 1
    (running,) = queue.pop(count=10, names=["render"])
    assert queue.redis.llen(token) == 0  # its workers would find nothing: none wakes
    assert queue.pop(names=["render"], wait=0.2) == []
    queue.finish(running)
    assert queue.redis.llen(token) == 1  # room again: a waiting worker wakes
    assert len(queue.pop(count=10, names=["render"], wait=30.0)) == 1


def test_name_and_tenant_limits_combine(queue: FairQueue) -> None:
    queue.set_tenant("u0", concurrency=1)
    queue.set_limits("render", concurrency=3)
    push(queue, "render", 4, tenants=1)
    assert len(queue.pop(count=10, names=["render"])) == 1  # the tenant's limit holds
    queue.set_tenant("u0", concurrency=0)
    assert len(queue.pop(count=10, names=["render"])) == 2  # then the name's


def test_a_rate_limit_holds_a_name_until_its_window_opens(queue: FairQueue) -> None:
    queue.set_limits("render", rate=2, period=0.5)
    push(queue, "render", 3)
    assert len(queue.pop(count=10, names=["render"])) == 2
    assert queue.pop(count=10, names=["render"]) == []
    assert queue.limits("render").window_opens_at is not None
    # The window opens: a waiting pop wakes by itself, with no push.
    assert len(wait_for(lambda: queue.pop(count=10, names=["render"], wait=5.0))) == 1


def test_a_paused_name_starts_nothing_until_resumed(queue: FairQueue) -> None:
    queue.set_limits("render", paused=True)
    push(queue, "render", 2)
    assert queue.pop(count=10, names=["render"]) == []
    assert queue.pop(count=10) == []  # a pop of any name too
    queue.set_limits("render", paused=False)
    assert len(queue.pop(count=10, names=["render"])) == 2


def test_a_limit_counts_the_tasks_already_running(queue: FairQueue) -> None:
    push(queue, "render", 5)
    running = queue.pop(count=3, names=["render"])
    assert queue.set_limits("render", concurrency=2).running == 3
    assert queue.pop(count=10, names=["render"]) == []
    queue.finish_many(running[:2], [None, None])
    assert len(queue.pop(count=10, names=["render"])) == 1  # 1 running, room for 1


def test_limits_are_listed_and_reset(queue: FairQueue) -> None:
    queue.set_tenant("alice", weight=2)  # kept beside the names' limits, listed apart
    queue.set_limits("render", concurrency=2)
    queue.set_limits("mail", rate=10, period=60.0)
    assert [shares.tenant for shares in queue.tenants_with_shares().tenants] == ["alice"]
    page = queue.names_with_limits()
    assert {limits.name: (limits.concurrency, limits.rate) for limits in page.names} == {
        "render": (2, 0),
        "mail": (0, 10),
    }
    queue.set_limits("render", concurrency=0)
    assert [limits.name for limits in queue.names_with_limits().names] == ["mail"]
    assert queue.limits("render").concurrency == 0


def test_bad_limits_are_refused_and_change_nothing(queue: FairQueue) -> None:
    with pytest.raises(InvalidInput, match="concurrency"):
        queue.set_limits("render", concurrency=-1)
    with pytest.raises(InvalidInput, match="rate"):
        queue.set_limits("render", rate=10**9)
    with pytest.raises(InvalidInput, match="name"):
        queue.set_limits("", concurrency=1)
    assert queue.names_with_limits().names == []
