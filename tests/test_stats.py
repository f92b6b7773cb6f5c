"""Stats that cost the same at any number of tenants: the scripts keep the sums as tasks
come and go (``ready:total``, the tenants' counter sums), rank tenants by backlog, and
``stats()`` reads only the busiest. These tests hold those sums to what is really queued,
through every path that adds or takes a ready task."""

from __future__ import annotations

import random

import msgspec
import pytest

from fairque import (
    FairQueue,
    InvalidInput,
    Priority,
    ShardedQueue,
    Task,
    TaskState,
    TenantStats,
)
from fairque.queue.models import STATS_TENANTS
from fairque.servers.embedded import LocalServer


def _really_queued(queue: FairQueue, tenants: list[str]) -> dict[str, int]:
    """Each tenant's ready tasks, counted in its queues (not from any sum the scripts
    keep). The queues are named, not scanned for: the session's server holds every
    other test's keys too."""
    prefix = queue.namespace.prefix
    pipe = queue.redis.pipeline(transaction=False)
    for tenant in tenants:
        pipe.llen(f"{prefix}queue:user:{tenant}:critical")
        for priority in range(1, 6):
            pipe.zcard(f"{prefix}queue:user:{tenant}:normal:{priority}")
    lengths = pipe.execute()
    per_tenant = len(lengths) // len(tenants)
    counts = {
        tenant: sum(lengths[i * per_tenant : (i + 1) * per_tenant])
        for i, tenant in enumerate(tenants)
    }
    return {tenant: n for tenant, n in counts.items() if n}


def _all_pages(queue: FairQueue, count: int) -> dict[str, TenantStats]:
    rows: dict[str, TenantStats] = {}
    cursor = 0
    for _ in range(1000):
        page = queue.busiest_tenants(cursor, count)
        assert not rows.keys() & page.tenants.keys()  # nothing moved: no tenant twice
        rows.update(page.tenants)
        cursor = page.cursor
        if not cursor:
            return rows
    pytest.fail("the pages never ended")


def test_stats_hold_the_busiest_tenants_and_the_sums_over_all(queue: FairQueue) -> None:
    tenants = STATS_TENANTS + 5
    # tenant-00 has 1 task, tenant-01 2... the busiest is the last.
    queue.push_many([Task(user_id=f"tenant-{n:02}") for n in range(tenants) for _ in range(n + 1)])
    (first,) = queue.pop(count=1)  # tenant-00's only task: it has none left
    queue.finish(first, None)

    stats = queue.stats()
    total = tenants * (tenants + 1) // 2
    assert stats.tenants_with_ready == tenants - 1
    assert list(stats.tenants) == [f"tenant-{n:02}" for n in range(tenants - 1, 4, -1)]
    assert stats.all_tenants.pushed == total
    assert stats.all_tenants.finished == 1
    assert stats.all_tenants.queued == total - 1 == stats.states[TaskState.QUEUED]
    assert sum(one.queued for one in stats.tenants.values()) < total - 1  # not all shown
    assert stats.tenants["tenant-24"] == TenantStats(queued=25, pushed=25)


def test_stats_read_as_many_tenants_fairness_figures_as_asked(queue: FairQueue) -> None:
    queue.push_many([Task(user_id=f"t{n}") for n in range(4) for _ in range(n + 1)])
    assert len(queue.pop(count=10)) == 10
    full, two, polled = (queue.stats(fairness_top=top) for top in (20, 2, 0))
    assert full.fairness is not None
    assert two.fairness is not None
    assert polled.fairness is not None  # what an overview that polls reads: no tenants
    assert [one.tenant for one in full.fairness.tenants] == ["t3", "t2", "t1", "t0"]
    assert [one.tenant for one in two.fairness.tenants] == ["t3", "t2"]
    assert polled.fairness.tenants == []
    assert polled.fairness.starts == full.fairness.starts == 10
    assert sum(minute.starts for minute in polled.fairness.history) == 10  # the chart's
    assert polled.fairness.other_starts == 10
    assert (polled.states, polled.counters) == (full.states, full.counters)


def _figures_keys(queue: FairQueue) -> dict[str, str]:
    """The namespace's fairness figures keys, '<minute>:<part>' -> key (parts: all,
    starts, waits, pending)."""
    prefix = queue.namespace.key("fairness:")
    keys = (key.decode() for key in queue.redis.scan_iter(f"{prefix}*", count=10_000))
    return {key[len(prefix) :]: key for key in keys}


def test_the_figures_read_the_same_folded_or_pending(queue: FairQueue) -> None:
    # Long names fill a minute's pending records (4 KB) in ~100 one-task pops.
    tenants = [f"tenant-with-a-long-name-{n:03}" for n in range(30)]
    queue.push_many([Task(user_id=tenant) for tenant in tenants for _ in range(5)])
    started: dict[str, int] = {}
    for _ in range(140):
        (task,) = queue.pop(count=1)
        started[task.user_id] = started.get(task.user_id, 0) + 1
        queue.finish(task, None)
    parts = {key.rsplit(":", 1)[1] for key in _figures_keys(queue)}
    assert {"starts", "waits", "pending"} <= parts  # some folded, some pending: both read
    view = queue.fairness(minutes=2, top=100)
    assert view.starts == sum(view.waits) == 140
    assert {one.tenant: one.starts for one in view.tenants} == started
    assert all(sum(one.waits) == one.starts for one in view.tenants)
    polled = queue.stats(fairness_top=0).fairness
    assert polled is not None
    assert sum(minute.starts for minute in polled.history) == 140


def test_a_later_minute_folds_the_pending_figures_of_earlier_ones(queue: FairQueue) -> None:
    seconds, _ = queue.redis.time()
    earlier = seconds // 60 - 3
    pending = queue.namespace.key(f"fairness:{earlier}:pending")
    # What a pop of 3 tasks of "early" (waits in buckets 0 and 2) appended in that minute.
    queue.redis.set(pending, msgspec.msgpack.encode(["early", [0, 2, 2, 1]]), ex=600)
    queue.push(Task(user_id="now"))
    queue.pop(count=1)  # the minute's first record: earlier minutes are folded
    keys = _figures_keys(queue)
    assert f"{earlier}:pending" not in keys
    assert queue.redis.zscore(keys[f"{earlier}:starts"], "early") == 3
    assert queue.redis.hmget(keys[f"{earlier}:waits"], "early|0", "early|2") == [b"2", b"1"]
    assert 0 < queue.redis.ttl(keys[f"{earlier}:starts"]) <= 11 * 60
    view = queue.fairness(minutes=5, top=10)
    assert {one.tenant: one.starts for one in view.tenants} == {"early": 3, "now": 1}


@pytest.mark.parametrize("top", [-1, 101, True, 1.5])
def test_stats_refuse_a_fairness_top_out_of_bounds(queue: FairQueue, top: int) -> None:
    with pytest.raises(InvalidInput, match="fairness_top"):
        queue.stats(fairness_top=top)


def test_busiest_tenants_page_through_every_tenant_busiest_first(queue: FairQueue) -> None:
    queue.push_many([Task(user_id=f"t{n}") for n in range(7) for _ in range(n + 1)])
    rows = _all_pages(queue, 3)
    assert [one.queued for one in rows.values()] == [7, 6, 5, 4, 3, 2, 1]
    assert rows == _all_pages(queue, 100)
    assert queue.busiest_tenants(0, 7).cursor == 7  # a full page: there may be more
    assert queue.busiest_tenants(7, 7).tenants == {}


def test_a_named_tenants_figures_outlive_its_backlog(queue: FairQueue) -> None:
    queue.push(Task(user_id="alice"))
    (task,) = queue.pop()
    queue.fail(task, "no", retry=False)
    assert queue.tenant_stats("alice") == TenantStats(pushed=1, failed=1)
    assert "alice" not in queue.busiest_tenants().tenants  # nothing ready: not ranked
    assert queue.tenant_stats("nobody") == TenantStats()
    with pytest.raises(InvalidInput, match="user_id"):
        queue.tenant_stats("")
    with pytest.raises(InvalidInput, match="cursor"):
        queue.busiest_tenants(-1)
    with pytest.raises(InvalidInput, match="count"):
        queue.busiest_tenants(0, 0)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_kept_sums_match_the_queues_through_every_path(queue: FairQueue, seed: int) -> None:
    """Pushes of every priority (critical ones handed back to the head), delays,
    dependencies, pops in batches, finishes, failures with and without retry, releases,
    cancels and shares that hold tenants: after each step, the kept sums equal what the
    queues hold."""
    rng = random.Random(seed)
    tenants = [f"u{n}" for n in range(6)]
    queue.set_tenant("u0", concurrency=2)
    queue.set_tenant("u1", weight=3)
    queued_ids: list[str] = []
    for _ in range(150):
        step = rng.choice(["push", "push", "pop", "cancel", "promote"])
        if step == "push":
            tasks = [
                Task(
                    user_id=rng.choice(tenants),
                    priority=rng.choice(list(Priority)),
                    delay=rng.choice([0, 0, 0, 0.001]),
                    max_retries=1,
                )
                for _ in range(rng.randint(1, 8))
            ]
            queued_ids += queue.push_many(tasks)
        elif step == "pop":
            for task in queue.pop(count=rng.randint(1, 6)):
                choice = rng.randrange(4)
                if choice == 0:
                    queue.finish(task, None)
                elif choice == 1:
                    queue.fail(task, "again", retry=True)
                elif choice == 2:
                    queue.fail(task, "gone", retry=False)
                else:
                    queue.release([task])
        elif step == "cancel" and queued_ids:
            queue.cancel(queued_ids.pop(rng.randrange(len(queued_ids))))
        else:
            queue.reap(100)
        really = _really_queued(queue, tenants)
        stats = queue.stats()
        assert stats.all_tenants.queued == sum(really.values())
        ranked = {tenant: one.queued for tenant, one in _all_pages(queue, 4).items()}
        assert ranked == really
        assert stats.tenants_with_ready == len(really)


def test_a_sharded_queue_pages_shard_after_shard(server: LocalServer, namespace: str) -> None:
    with ShardedQueue(server.url, namespace, shards=3) as sharded:
        sharded.push_many([Task(user_id=f"t{n}") for n in range(8) for _ in range(n + 1)])
        rows: dict[str, TenantStats] = {}
        cursor = 0
        for _ in range(20):
            page = sharded.busiest_tenants(cursor, 2)
            assert not rows.keys() & page.tenants.keys()
            rows.update(page.tenants)
            cursor = page.cursor
            if not cursor:
                break
        assert {tenant: one.queued for tenant, one in rows.items()} == {
            f"t{n}": n + 1 for n in range(8)
        }
        assert sharded.tenant_stats("t7") == TenantStats(queued=8, pushed=8)
        stats = sharded.stats()
        assert list(stats.tenants)[:2] == ["t7", "t6"]  # the busiest of all shards first
        assert (stats.all_tenants.queued, stats.tenants_with_ready) == (36, 8)
