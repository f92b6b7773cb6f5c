"""The fair policy of design section 5, observed through pops on real servers."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import pytest

from fairque import FairQueue, Priority, Task, TaskState

pytestmark = pytest.mark.cluster


def tenants_of(queue: FairQueue, pops: int, count: int = 1) -> list[str]:
    order: list[str] = []
    for _ in range(pops):
        order += [task.user_id for task in queue.pop(count=count)]
    return order


def test_critical_is_fifo_and_goes_first(queue: FairQueue) -> None:
    queue.push(Task(user_id="u", priority=Priority.HIGHEST, payload="normal"))
    queue.push(Task(user_id="u", priority=Priority.CRITICAL, payload="c1"))
    queue.push_many(
        [Task(user_id="u", priority=Priority.CRITICAL, payload=f"c{i}") for i in (2, 3)]
    )
    queue.push(Task(user_id="u", priority=Priority.CRITICAL, payload="c4"))
    payloads = [task.payload for task in queue.pop(count=5)]
    assert payloads == ["c1", "c2", "c3", "c4", "normal"]


def test_fifo_within_a_priority_even_in_one_batch(queue: FairQueue) -> None:
    queue.push_many([Task(user_id="u", payload=i) for i in range(200)])
    assert [task.payload for task in queue.pop(count=200)] == list(range(200))


def test_round_robin_across_tenants_with_several_clients(
    make_queue: Callable[[], FairQueue],
) -> None:
    pusher = make_queue()
    pusher.push_many([Task(user_id="heavy", payload=i) for i in range(10)])
    pusher.push_many([Task(user_id="b", payload=i) for i in range(3)])
    pusher.push_many([Task(user_id="c", payload=i) for i in range(3)])
    clients = [make_queue() for _ in range(3)]
    order = [clients[i % 3].pop()[0].user_id for i in range(16)]
    assert order == ["heavy", "b", "c"] * 3 + ["heavy"] * 7


def test_batch_order_equals_one_at_a_time(make_queue: Callable[[], FairQueue]) -> None:
    def fill(queue: FairQueue) -> None:
        queue.push_many([Task(user_id="big", payload=i) for i in range(30)])
        for tenant in ("s1", "s2", "s3", "s4"):
            queue.push_many([Task(user_id=tenant, payload=i) for i in range(4)])

    ring = make_queue()
    fill(ring)
    expected = [(t.user_id, t.payload) for _ in range(46) for t in ring.pop()]
    assert len(expected) == 46
    batched = FairQueue(client=ring.redis, namespace=ring.namespace.name + "-b")
    fill(batched)
    got = [(t.user_id, t.payload) for count in (3, 10, 1, 7, 25) for t in batched.pop(count)]
    assert got == expected


def test_fairness_small_tenants_are_not_stuck_behind_a_big_one(queue: FairQueue) -> None:
    queue.push_many([Task(user_id="big", payload=i) for i in range(500)])
    for tenant in range(20):
        queue.push_many([Task(user_id=f"small{tenant}", payload=i) for i in range(5)])
    order = tenants_of(queue, pops=20, count=30)
    last_small = max(i for i, tenant in enumerate(order) if tenant != "big")
    assert last_small < 21 * 5  # ideal round robin: 21 tenants, 5 rounds
    assert Counter(order[:21]) == Counter(["big"] + [f"small{t}" for t in range(20)])


def test_aging_lets_a_long_waiting_low_task_beat_a_fresh_high_one(queue: FairQueue) -> None:
    waited = datetime.now(timezone.utc) - timedelta(seconds=100)
    queue.push(Task(user_id="u", priority=Priority.HIGHEST, payload="fresh high"))
    queue.push(Task(user_id="u", priority=Priority.LOWEST, payload="old low", execute_after=waited))
    assert [task.payload for task in queue.pop(count=2)] == ["old low", "fresh high"]


def test_a_fresh_high_task_beats_a_recent_low_one(queue: FairQueue) -> None:
    queue.push_many(
        [
            Task(user_id="u", priority=Priority.LOWEST, payload="low"),
            Task(user_id="u", priority=Priority.NORMAL, payload="normal"),
            Task(user_id="u", priority=Priority.HIGHEST, payload="high"),
        ]
    )
    assert [task.payload for task in queue.pop(count=3)] == ["high", "normal", "low"]


def test_critical_beats_even_a_long_waiting_normal_task(queue: FairQueue) -> None:
    waited = datetime.now(timezone.utc) - timedelta(days=1)
    queue.push(Task(user_id="u", priority=Priority.HIGHEST, payload="old", execute_after=waited))
    queue.push(Task(user_id="u", priority=Priority.CRITICAL, payload="critical"))
    assert [task.payload for task in queue.pop(count=2)] == ["critical", "old"]


def test_delayed_tasks_do_not_block_ready_ones(queue: FairQueue) -> None:
    later = queue.push(Task(user_id="u", priority=Priority.CRITICAL, delay=timedelta(minutes=5)))
    queue.push(Task(user_id="u", priority=Priority.LOWEST, payload="ready"))
    assert [task.payload for task in queue.pop(count=5)] == ["ready"]
    info = queue.get(later)
    assert info is not None
    assert info.state.value == "scheduled"
    assert queue.stats().states[info.state] == 1


def test_assigned_users_first_then_steal_targets(queue: FairQueue) -> None:
    for tenant in ("mine", "other", "theirs"):
        queue.push_many([Task(user_id=tenant, payload=i) for i in range(2)])
    got = queue.pop(count=10, assigned_users=["mine"], steal_targets=["theirs", "mine"])
    assert [task.user_id for task in got] == ["mine", "mine", "theirs", "theirs"]
    assert [task.user_id for task in queue.pop(count=10, assigned_users=["mine"])] == []
    assert [task.user_id for task in queue.pop(count=10, steal_targets=["other"])] == ["other"] * 2


def test_assigned_users_rotate_among_themselves(queue: FairQueue) -> None:
    for tenant in ("a", "b", "c"):
        queue.push_many([Task(user_id=tenant, payload=i) for i in range(3)])
    got = queue.pop(count=6, assigned_users=["c", "a"])
    assert [task.user_id for task in got] == ["a", "c", "a", "c", "a", "c"]
    assert [task.user_id for task in queue.pop(count=3)] == ["b", "b", "b"]


def test_concurrent_pops_deliver_each_task_once(make_queue: Callable[[], FairQueue]) -> None:
    make_queue().push_many([Task(user_id=f"u{i % 7}", payload=i) for i in range(600)])
    seen: list[int] = []
    lock = threading.Lock()

    def work(queue: FairQueue) -> None:
        while tasks := queue.pop(count=9):
            queue.finish_many(tasks)
            with lock:
                seen.extend(task.payload for task in tasks)

    threads = [threading.Thread(target=work, args=(make_queue(),)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(seen) == list(range(600))
    assert make_queue().stats().counters["finished"] == 600


def test_a_pop_of_many_puts_the_leases_in_a_skiplist(queue: FairQueue) -> None:
    # A pop of 16 tasks or more writes its leases into a skiplist (finish takes them off
    # one by one, which scans a listpack), also when it creates the key, and over more
    # than one chunk of 1,000 values; the member that makes it one is gone at once.
    leases = queue.namespace.key("leases")
    queue.push_many([Task(user_id=f"t{n % 3}") for n in range(1_030)])
    few = queue.pop(count=10)
    assert queue.redis.object("encoding", leases) == b"listpack"
    more = queue.pop(count=20)
    assert queue.redis.object("encoding", leases) == b"skiplist"
    held = {task.task_id.encode() for task in (*few, *more)}
    assert set(queue.redis.zrange(leases, 0, -1)) == held
    assert queue.finish_many([*few, *more]) == []
    assert queue.redis.exists(leases) == 0
    many = queue.pop(count=1_000)
    assert queue.redis.object("encoding", leases) == b"skiplist"
    assert set(queue.redis.zrange(leases, 0, -1)) == {task.task_id.encode() for task in many}
    deadline = queue.redis.hget(queue.namespace.key(f"task:{many[-1].task_id}"), "lease_deadline")
    assert queue.redis.zscore(leases, many[-1].task_id) == float(deadline or 0)
    assert queue.stats().states[TaskState.STARTED] == 1_000
    assert queue.finish_many(many) == []
    assert queue.redis.exists(leases) == 0


def test_wide_rings_and_pops_keep_the_tenant_keys_out_of_listpacks(queue: FairQueue) -> None:
    # A ring that grows to 8 tenants, or a pop reaching 8 tenants or more, turns the ring,
    # the ready entries, the running counts and the tenants' counters into skiplists and
    # hash tables (writes scan a listpack); nothing else changes: the member that turns
    # them is gone, the order is the same.
    names = ("ring", "ready", "running", "stats:tenants")
    keys = {name: queue.namespace.key(name) for name in names}
    queue.push_many([Task(user_id=f"t{n}") for n in range(6) for _ in range(3)])
    narrow = queue.pop(count=4)
    assert [task.user_id for task in narrow] == ["t0", "t1", "t2", "t3"]
    encodings = {name: queue.redis.object("encoding", key) for name, key in keys.items()}
    assert set(encodings.values()) == {b"listpack"}
    queue.push_many([Task(user_id=f"t{n}") for n in range(6, 12) for _ in range(3)])
    assert queue.redis.object("encoding", keys["ring"]) == b"skiplist"  # 12 tenants now
    assert queue.redis.object("encoding", keys["ready"]) == b"skiplist"
    ring_order = (4, 5, 0, 1, 2, 3, *range(6, 12))  # the served ones went to the back
    wide = queue.pop(count=12)
    assert [task.user_id for task in wide] == [f"t{n}" for n in ring_order]
    encodings = {name: queue.redis.object("encoding", key) for name, key in keys.items()}
    assert encodings == {"ring": b"skiplist", "ready": b"skiplist", "running": b"hashtable",
                         "stats:tenants": b"hashtable"}  # fmt: skip
    served_last = [f"t{n}".encode() for n in ring_order]  # by last serve
    assert queue.redis.zrange(keys["ring"], 0, -1) == served_last
    assert len(queue.redis.zrange(keys["ready"], 0, -1)) == 12
    assert queue.redis.hgetall(keys["running"]) == {f"t{n}".encode(): b"2" if n < 4 else b"1"
                                                    for n in range(12)}  # fmt: skip
    stats = queue.stats()
    assert (stats.all_tenants.queued, stats.all_tenants.pushed) == (36 - 16, 36)
    assert stats.tenants["t0"].pushed == 3
