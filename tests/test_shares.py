"""Tunable shares (design section 5.5): weights, concurrency and rate limits, pause.

Every path that ends a lease must give a concurrency-limited tenant its slot back, and a
held tenant must be out of the ring (not skipped by scanning), so these tests look at the
ring through ``tenant()`` as well as at what pops return.
"""

from __future__ import annotations

from collections import Counter

import pytest
from redis.cluster import RedisCluster

from fairque import FairQueue, InvalidInput, LeasedTask, Queue, ShardedQueue, Task
from tests.conftest import Server, wait_for, waiting_workers

pytestmark = pytest.mark.cluster


def push(queue: Queue, tenant: str, n: int) -> None:
    queue.push_many([Task(user_id=tenant, payload=i) for i in range(n)])


def one_at_a_time(queue: FairQueue, pops: int) -> list[str]:
    order: list[str] = []
    for _ in range(pops):
        order += [task.user_id for task in queue.pop(count=1)]
    return order


def test_every_tenant_has_default_shares(queue: FairQueue) -> None:
    push(queue, "a", 2)
    shares = queue.tenant("a")
    assert (shares.weight, shares.concurrency, shares.rate, shares.paused) == (1, 0, 0, False)
    assert (shares.ready, shares.running, shares.servable) == (2, 0, True)
    assert shares.window_opens_at is None
    assert queue.tenants_with_shares().tenants == []


def test_a_change_keeps_what_it_does_not_name_and_defaults_leave_no_trace(
    queue: FairQueue,
) -> None:
    queue.set_tenant("a", weight=3, concurrency=2)
    shares = queue.set_tenant("a", rate=10, period=1.5)
    assert (shares.weight, shares.concurrency, shares.rate, shares.period) == (3, 2, 10, 1.5)
    assert [t.tenant for t in queue.tenants_with_shares().tenants] == ["a"]
    shares = queue.set_tenant("a", weight=1, concurrency=0, rate=0)
    assert (shares.rate, shares.period) == (0, 0.0)  # no rate: no period either
    assert queue.tenants_with_shares().tenants == []


def test_a_rate_given_alone_counts_starts_per_second(queue: FairQueue) -> None:
    assert (queue.set_tenant("a", rate=5).rate, queue.tenant("a").period) == (5, 1.0)
    assert queue.set_tenant("a", period=60).rate == 5  # the rate stays, over a new window
    assert queue.set_tenant("a", rate=7).period == 60  # and a new rate keeps the window
    assert queue.set_tenant("a", rate=0).period == 0  # no limit: no window


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"weight": 0}, "weight"),
        ({"weight": 1001}, "weight"),
        ({"concurrency": -1}, "concurrency"),
        ({"rate": 2.5}, "rate"),
        ({"rate": 10_001, "period": 1}, "rate"),
        ({"period": 0}, "period"),
        ({"weight": True}, "weight"),
    ],
)
def test_bad_shares_are_refused_naming_the_field_and_change_nothing(
    queue: FairQueue, change: dict[str, object], field: str
) -> None:
    queue.set_tenant("a", weight=2)
    with pytest.raises(InvalidInput) as caught:
        queue.set_tenant("a", **change)  # type: ignore[arg-type]
    assert field in str(caught.value)
    assert queue.tenant("a").weight == 2
    with pytest.raises(InvalidInput):
        queue.tenant("")


def test_weight_three_gets_three_turns_for_each_turn_of_weight_one(queue: FairQueue) -> None:
    push(queue, "heavy", 30)
    push(queue, "light", 30)
    queue.set_tenant("heavy", weight=3)
    order = one_at_a_time(queue, 16)
    assert order[:8] == ["heavy", "heavy", "heavy", "light"] * 2
    assert Counter(order) == {"heavy": 12, "light": 4}


def test_a_weighted_batch_equals_one_at_a_time(queue: FairQueue) -> None:
    orders = []
    batched = FairQueue(client=queue.redis, namespace=queue.namespace.name + "-b")
    for client, counts in ((queue, [1] * 42), (batched, [3, 10, 1, 7, 21])):
        for tenant, weight in (("a", 2), ("b", 1), ("c", 3)):
            push(client, tenant, 30)
            client.set_tenant(tenant, weight=weight)
        orders.append([task.user_id for count in counts for task in client.pop(count=count)])
    assert orders[0] == orders[1]
    assert orders[0][:6] == ["a", "a", "b", "c", "c", "c"]
    assert Counter(orders[0]) == {"a": 14, "b": 7, "c": 21}


@pytest.mark.parametrize(
    ("old", "new", "order"),
    [
        (3, 1, ["b", "a", "b"]),  # lowered below what the turn gave: the turn ends now
        (3, 2, ["a", "b", "a", "a", "b"]),  # one given of two: one more, then full turns
        (2, 4, ["a", "a", "a", "b"]),  # raised: the turn goes on to the new weight
        (1, 3, ["b", "a", "a", "a"]),  # a turn of one was over: the next is of three
    ],
)
def test_a_weight_change_applies_at_once_mid_turn_too(
    queue: FairQueue, old: int, new: int, order: list[str]
) -> None:
    push(queue, "a", 10)
    push(queue, "b", 10)
    queue.set_tenant("a", weight=old)
    assert one_at_a_time(queue, 1) == ["a"]  # a's turn has given one task
    queue.set_tenant("a", weight=new)
    assert one_at_a_time(queue, len(order)) == order


def test_a_tenant_at_its_concurrency_limit_leaves_the_ring_without_blocking_others(
    queue: FairQueue,
) -> None:
    push(queue, "a", 5)
    push(queue, "b", 5)
    queue.set_tenant("a", concurrency=2)
    leased = queue.pop(count=10)
    assert Counter(task.user_id for task in leased) == {"a": 2, "b": 5}
    shares = queue.tenant("a")
    assert (shares.running, shares.ready, shares.servable) == (2, 3, False)
    assert queue.pop(count=10) == []
    mine = [task for task in leased if task.user_id == "a"]
    queue.finish(mine[0])
    assert queue.tenant("a").servable
    again = queue.pop(count=10)
    assert [task.user_id for task in again] == ["a"]
    assert queue.tenant("a").running == 2


def _held_a(queue: FairQueue) -> list[LeasedTask]:
    push(queue, "a", 3)
    queue.set_tenant("a", concurrency=1)
    leased = queue.pop(count=3)
    assert [task.user_id for task in leased] == ["a"]
    assert not queue.tenant("a").servable
    return leased


@pytest.mark.parametrize("ending", ["finish", "fail", "retry", "release", "hand_over"])
def test_every_ending_gives_the_slot_back(queue: FairQueue, ending: str) -> None:
    (task,) = _held_a(queue)
    if ending == "finish":
        queue.finish(task)
    elif ending in ("fail", "retry"):
        queue.fail(task, "boom", retry=ending == "retry")
    elif ending == "release":
        queue.release([task])
    else:
        queue.hand_over([task], delay=60.0, grace=3600.0)
    shares = queue.tenant("a")
    assert shares.running == 0
    assert shares.servable
    assert [t.user_id for t in queue.pop(count=3)] == ["a"]  # and the limit still holds


def test_an_expired_lease_gives_the_slot_back(queue: FairQueue) -> None:
    push(queue, "a", 3)
    queue.set_tenant("a", concurrency=1)
    assert len(queue.pop(count=3, lease_seconds=0.05)) == 1
    # The worker died (SIGKILL): nobody finishes the task; its lease runs out.
    wait_for(lambda: queue.reap().expired == 1)
    assert queue.tenant("a").running == 0
    again = queue.pop(count=3)
    assert len(again) == 1  # the limit holds: the expired task is back in line, one runs
    assert queue.tenant("a").running == 1


def test_a_limit_set_while_tasks_run_counts_them(queue: FairQueue) -> None:
    push(queue, "a", 5)
    queue.pop(count=3)
    shares = queue.set_tenant("a", concurrency=2)
    assert (shares.running, shares.servable) == (3, False)
    assert queue.pop(count=5) == []


def test_assigned_workers_skip_a_held_tenant_too(queue: FairQueue) -> None:
    push(queue, "a", 3)
    queue.set_tenant("a", concurrency=1)
    assert len(queue.pop(count=3, assigned_users=["a"])) == 1
    assert queue.pop(count=3, assigned_users=["a"]) == []


def test_a_paused_tenant_keeps_its_tasks_and_the_rest_flow(queue: FairQueue) -> None:
    queue.set_tenant("a", paused=True)
    push(queue, "a", 3)
    push(queue, "b", 2)
    assert [task.user_id for task in queue.pop(count=10)] == ["b", "b"]
    shares = queue.tenant("a")
    assert (shares.paused, shares.ready, shares.servable) == (True, 3, False)
    queue.set_tenant("a", paused=False)
    assert [task.user_id for task in queue.pop(count=10)] == ["a"] * 3


def test_pushes_for_a_held_tenant_wake_no_worker(queue: FairQueue) -> None:
    if isinstance(queue.redis, RedisCluster):
        pytest.skip("the wake channel is the same script code on a cluster; read it simply")
    queue.set_tenant("a", paused=True)
    wake = queue.redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    wake.ssubscribe(queue.namespace.wake_channel)
    try:
        wait_for(lambda: waiting_workers(queue) == 1)
        token = queue.namespace.key("wakeups:any")  # what a worker waiting in its pop waits for
        push(queue, "a", 2)  # paused: nobody may serve it, so no message
        assert queue.redis.llen(token) == 0
        push(queue, "b", 1)  # one tenant may be served: one message
        message = wait_for(lambda: wake.get_sharded_message(timeout=0.05))
        assert message["data"] == b""  # it names the lane: that of unnamed tasks
        assert wake.get_sharded_message(timeout=0.05) is None
        assert queue.redis.llen(token) == 1
    finally:
        wake.close()


def test_more_work_for_a_tenant_with_ready_tasks_wakes_no_worker(queue: FairQueue) -> None:
    if isinstance(queue.redis, RedisCluster):
        pytest.skip("the wake channel is the same script code on a cluster; read it simply")
    wake = queue.redis.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    wake.ssubscribe(queue.namespace.wake_channel)
    try:
        wait_for(lambda: waiting_workers(queue) == 1)
        push(queue, "a", 1)  # "a" comes into the ring: the workers are told
        assert wait_for(lambda: wake.get_sharded_message(timeout=0.05))["data"] == b""
        push(queue, "a", 1)  # "a" was in the ring already: nothing new to serve
        push(queue, "a", 3)
        push(queue, "b", 1)  # "b" comes in: one message, for it alone
        assert wait_for(lambda: wake.get_sharded_message(timeout=0.05))["data"] == b""
        assert wake.get_sharded_message(timeout=0.05) is None
        assert queue.redis.llen(queue.namespace.key("wakeups:any")) == 1
        assert Counter(task.user_id for task in queue.pop(count=10)) == {"a": 5, "b": 1}
    finally:
        wake.close()


def test_a_rate_limited_tenant_sleeps_until_its_window_opens(queue: FairQueue) -> None:
    push(queue, "a", 5)
    push(queue, "b", 5)
    queue.set_tenant("a", rate=2, period=0.3)
    first = queue.pop(count=10)
    assert Counter(task.user_id for task in first) == {"a": 2, "b": 5}
    shares = queue.tenant("a")
    assert not shares.servable
    assert shares.window_opens_at is not None
    due = queue.next_due()
    assert due is not None
    assert due <= 0.3  # an idle worker wakes when the window opens
    third = wait_for(lambda: queue.pop(count=10))
    assert [task.user_id for task in third] == ["a", "a"]
    # No window of `period` ever held more than `rate` starts (server clock).
    starts = sorted(
        info.leased_at
        for task in first + third
        if task.user_id == "a" and (info := queue.get(task.task_id)) and info.leased_at
    )
    assert starts[2] - starts[0] >= 0.3
    assert starts[3] - starts[1] >= 0.3


def test_shares_route_to_the_tenants_shard(server: Server, namespace: str) -> None:
    queue = ShardedQueue(server.url, namespace=namespace, shards=3)
    try:
        for tenant in ("a", "b", "c", "d"):
            push(queue, tenant, 3)
            queue.set_tenant(tenant, concurrency=1)
        leased = queue.pop(count=20)
        assert Counter(task.user_id for task in leased) == {"a": 1, "b": 1, "c": 1, "d": 1}
        assert queue.tenant("c").running == 1
        listed, cursor = [], 0
        while True:
            page = queue.tenants_with_shares(cursor, count=1)
            listed += [shares.tenant for shares in page.tenants]
            cursor = page.cursor
            if not cursor:
                break
        assert sorted(listed) == ["a", "b", "c", "d"]
    finally:
        queue.close()


@pytest.mark.parametrize("tenants", [60, 300])  # a small hash comes whole; a large one in parts
def test_a_page_of_tenants_with_shares_honours_its_limit(queue: FairQueue, tenants: int) -> None:
    names = {f"t{n:03}" for n in range(tenants)}
    for name in names:
        queue.set_tenant(name, weight=2)
    listed: list[str] = []
    cursor, pages = 0, 0
    while True:
        page = queue.tenants_with_shares(cursor, count=10)
        assert len(page.tenants) <= 10
        listed += [shares.tenant for shares in page.tenants]
        pages += 1
        cursor = page.cursor
        if not cursor:
            break
    assert sorted(listed) == sorted(names)  # each once
    assert pages <= tenants // 10 + 2  # pages are full but where a scan batch ends


def test_the_fairness_view_counts_starts_and_waits_per_tenant(queue: FairQueue) -> None:
    assert queue.fairness().starts == 0
    push(queue, "big", 30)
    push(queue, "small", 3)
    queue.set_tenant("small", weight=2, concurrency=5)
    for _ in range(3):
        assert len(queue.pop(count=4)) == 4
    view = queue.fairness(minutes=2, top=1)
    assert view.starts == 12
    assert sum(view.waits) == 12
    (busiest,) = view.tenants
    assert (busiest.tenant, busiest.starts) == ("big", 9)
    assert busiest.share == pytest.approx(9 / 12)
    assert busiest.per_minute == pytest.approx(4.5)
    assert view.other_starts == 3
    wide = queue.fairness(top=5)
    small = next(one for one in wide.tenants if one.tenant == "small")
    assert (small.starts, small.shares.weight, small.shares.running) == (3, 2, 3)
    # The tasks waited from push to pop: a few ms at most here, never less than nothing.
    assert small.wait_p50 is not None
    assert 0 < small.wait_p50 <= small.wait_p99 <= 10  # type: ignore[operator]
    assert view.wait_p99 is not None


def test_the_fairness_view_refuses_a_window_it_does_not_keep(queue: FairQueue) -> None:
    for minutes, top in ((0, 5), (11, 5), (5, 0), (5, 101)):
        with pytest.raises(InvalidInput):
            queue.fairness(minutes, top)


def test_a_sharded_fairness_view_adds_the_shards_up(server: Server, namespace: str) -> None:
    queue = ShardedQueue(server.url, namespace=namespace, shards=3)
    try:
        for i, tenant in enumerate(("a", "b", "c", "d")):
            push(queue, tenant, i + 1)
        leased = queue.pop(count=20)
        assert len(leased) == 10
        view = queue.fairness(top=2)
        assert view.starts == 10
        assert [(one.tenant, one.starts) for one in view.tenants] == [("d", 4), ("c", 3)]
        assert view.other_starts == 3
        assert sum(one.share for one in view.tenants) == pytest.approx(0.7)
    finally:
        queue.close()


def test_stats_carry_the_fairness_view(queue: FairQueue) -> None:
    push(queue, "a", 2)
    queue.pop(count=2)
    fairness = queue.stats().fairness
    assert fairness is not None
    assert (fairness.minutes, fairness.starts) == (5, 2)
    assert [one.tenant for one in fairness.tenants] == ["a"]


def test_the_minutes_keep_what_the_throughput_chart_draws(queue: FairQueue) -> None:
    push(queue, "a", 4)
    leased = queue.pop(count=4)
    queue.finish_many(leased[:3])
    queue.fail(leased[3], "boom", retry=False)
    view = queue.fairness(minutes=3)
    assert len(view.history) == 3
    assert view.history[0].at < view.history[-1].at <= view.at
    totals = [sum(getattr(m, name) for m in view.history)
              for name in ("pushed", "starts", "finished", "failed")]  # fmt: skip
    assert totals == [4, 4, 3, 1]
    (served,) = view.tenants
    assert sum(served.starts_by_minute) == 4
    assert len(served.starts_by_minute) == 3
