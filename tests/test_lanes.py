"""Lanes (design section 5): a pop that names task names reaches only tasks of those
names, and of names no live worker serves; fair between tenants across the lanes it
reaches. Observed through pops on real servers."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from fairque import FairQueue, Task, TaskState
from fairque.errors import InvalidInput
from fairque.queue.models import WorkerInfo

pytestmark = pytest.mark.cluster


def register(queue: FairQueue, worker_id: str, *functions: str) -> None:
    queue.register_worker(WorkerInfo(worker_id, "host", 1, functions, 1, 0, time.time()), ttl=60.0)


def names_of(queue: FairQueue, count: int, *names: str) -> list[str | None]:
    return [task.name for task in queue.pop(count=count, names=names)]


def test_a_pop_reaches_only_the_names_it_serves(queue: FairQueue) -> None:
    register(queue, "render-worker", "render")
    register(queue, "mail-worker", "mail")
    queue.push_many([Task(user_id=f"u{n % 3}", name="render", payload=n) for n in range(9)])
    queue.push_many([Task(user_id=f"u{n % 3}", name="mail", payload=n) for n in range(6)])
    assert names_of(queue, 20, "mail") == ["mail"] * 6
    assert names_of(queue, 20, "mail") == []  # render is served elsewhere: never leased
    leased = queue.pop(count=20, names=["render"])
    # Fair between the tenants, in the order each came: FIFO within a tenant.
    assert [(task.user_id, task.payload) for task in leased] == [(f"u{n % 3}", n) for n in range(9)]
    stats = queue.stats()
    assert stats.states[TaskState.QUEUED] == 0
    assert stats.states[TaskState.STARTED] == 15


def test_names_no_live_worker_serves_are_reached_when_a_pop_is_short(queue: FairQueue) -> None:
    register(queue, "mail-worker", "mail")
    queue.push_many([Task(user_id="u", name="mail"), Task(user_id="v", name="orphan")])
    queue.push(Task(user_id="w"))
    queue.push(Task(user_id="u", name="render"))
    first = names_of(queue, 1, "render")
    assert first == ["render"]  # its own lane first
    rest = names_of(queue, 10, "render")
    assert Counter(rest) == {"orphan": 1, None: 1}  # then those nobody serves, not mail
    register(queue, "orphan-worker", "orphan")
    queue.push(Task(user_id="v", name="orphan"))
    assert names_of(queue, 10, "render") == []  # served now: left to its worker
    assert names_of(queue, 10, "orphan") == ["orphan"]
    assert names_of(queue, 10, "mail") == ["mail"]


def test_tasks_to_hand_over_are_no_starts(queue: FairQueue) -> None:
    """A worker leases a task no live worker serves only to hand it over: the counters
    and the fairness figures count real starts only."""
    register(queue, "mail-worker", "mail")
    queue.push_many([Task(user_id="u", name="mail"), Task(user_id="v", name="orphan")])
    assert Counter(names_of(queue, 10, "mail")) == {"mail": 1, "orphan": 1}
    assert queue.stats().counters["started"] == 1
    fairness = queue.fairness(minutes=1)
    assert (fairness.starts, [t.tenant for t in fairness.tenants]) == (1, ["u"])
    queue.push(Task(user_id="v", name="orphan"))
    # A pop naming no names takes any: a start.
    assert [task.name for task in queue.pop(count=10)] == ["orphan"]
    assert queue.stats().counters["started"] == 2
    assert queue.fairness(minutes=1).starts == 2


def test_more_lanes_than_a_library_keeps_prefixes_for(queue: FairQueue) -> None:
    """A library keeps 64 lanes' key prefixes per namespace, then starts again: the keys
    it makes after that are the same."""
    names = [f"name-{n}-" + "x" * 200 for n in range(70)]
    queue.push_many([Task(user_id=f"u{n % 3}", name=name) for n, name in enumerate(names)])
    for name in names:
        assert names_of(queue, 1, name) == [name]  # its own lane first
    assert queue.stats().states[TaskState.STARTED] == 70


def test_fair_between_tenants_across_the_lanes_a_pop_reaches(queue: FairQueue) -> None:
    """A tenant with tasks of several names gets no more turns than one with one name."""
    queue.push_many([Task(user_id="wide", name=name, payload=n) for n in range(3)
                     for name in ("a", "b", "c")])  # fmt: skip
    queue.push_many([Task(user_id="narrow", name="a", payload=n) for n in range(6)])
    order = [task.user_id for _ in range(12) for task in queue.pop(names=["a", "b", "c"])]
    assert order == ["wide", "narrow"] * 6


def test_a_pop_without_names_reaches_every_lane(queue: FairQueue) -> None:
    queue.push_many([Task(user_id="u", name="a"), Task(user_id="v", name="b"), Task(user_id="w")])
    assert Counter(task.name for task in queue.pop(count=10)) == {"a": 1, "b": 1, None: 1}
    assert queue.pop(count=10) == []


def test_counts_and_listings_span_the_lanes(queue: FairQueue) -> None:
    register(queue, "a-worker", "a")  # so that a pop for "b" leaves "a" alone
    ids = queue.push_many([Task(user_id="u", name=name) for name in ("a", "b", "b")])
    queue.push(Task(user_id="v", name="a"))
    stats = queue.stats()
    assert stats.states[TaskState.QUEUED] == 4
    assert {tenant: row.queued for tenant, row in stats.tenants.items()} == {"u": 3, "v": 1}
    queue.cancel(ids[1])
    assert queue.tenant_stats("u").queued == 2
    assert names_of(queue, 10, "b") == ["b"]
    assert queue.stats().states[TaskState.QUEUED] == 2
    assert Counter(task.name for task in queue.pop(count=10, names=["a"])) == {"a": 2}
    assert queue.stats().tenants == {}


def test_shares_hold_a_tenant_in_every_lane(queue: FairQueue) -> None:
    queue.set_tenant("u", concurrency=1)
    queue.push_many([Task(user_id="u", name=name) for name in ("a", "b")])
    first = queue.pop(names=["a", "b"])
    assert len(first) == 1
    assert queue.pop(names=["a", "b"]) == []  # its one slot is taken, whatever the name
    queue.finish(first[0])
    assert len(queue.pop(names=["a", "b"])) == 1


def test_the_names_of_a_pop_are_checked(queue: FairQueue) -> None:
    with pytest.raises(InvalidInput, match="names"):
        queue.pop(names=[])
    with pytest.raises(InvalidInput, match="not a single string"):
        queue.pop(names="render")
    with pytest.raises(InvalidInput, match="names"):
        queue.pop(names=[""])


def test_a_lane_token_wakes_only_the_workers_of_its_name(queue: FairQueue) -> None:
    register(queue, "a-worker", "a")
    token_a, token_b = (queue.namespace.lane_key(name, "wakeups") for name in ("a", "b"))
    queue.push(Task(user_id="u", name="a"))
    assert (queue.redis.llen(token_a), queue.redis.llen(token_b)) == (1, 0)
    assert queue.pop(names=["b"], wait=0.2) == []  # "a" is served: its task stays
    queue.push(Task(user_id="u", name="b"))
    assert names_of_waiting(queue, "b") == ["b"]
    assert names_of(queue, 10, "a") == ["a"]
    assert queue.redis.llen(token_a) == 0  # nothing left to serve there: taken away


def names_of_waiting(queue: FairQueue, *names: str) -> list[str | None]:
    return [task.name for task in queue.pop(count=10, names=names, wait=30.0)]
