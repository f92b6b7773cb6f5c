"""A namespace tidies itself: workers, the master and the scheduler run bounded
maintenance rounds, one at a time per namespace, so nothing relies on calling reap()."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from fairque import AsyncFairQueue, AsyncShardedQueue, FairQueue, QueueSettings, Task, TaskState
from fairque.queue.models import Maintenance, WorkerInfo
from fairque.servers.embedded import LocalServer
from fairque.worker import Registry, Worker, WorkerConfig, task
from tests.conftest import SCAN_COUNT, Server, until, wait_for

pytestmark = pytest.mark.cluster

SHORT = QueueSettings(finished_ttl=1, failed_ttl=1)
functions = Registry()


@task(into=functions, name="noop")
async def noop() -> None:
    pass


def registry_sizes(queue: FairQueue) -> list[int]:
    keys = (queue.namespace.key(f"state:{state}") for state in ("finished", "failed", "canceled"))
    return [int(queue.redis.zcard(key)) for key in keys]


async def test_a_lone_worker_keeps_its_namespace_bounded(
    server: LocalServer, namespace: str
) -> None:
    """No reap() anywhere: after the TTLs, the ended tasks have left the registries and the
    counts, and the server holds about what it held before."""
    queue = AsyncFairQueue(server.url, namespace, settings=SHORT)
    sync = FairQueue(server.url, namespace, settings=SHORT)
    try:
        await queue.push_many(
            [noop.build(user_id=f"tenant-{n % 20}", max_retries=0) for n in range(2000)]
        )
        # An idle worker's round comes with its upkeep, once a poll interval, and is a
        # full one (the one that drops expired ids from the registries) once ten waits
        # since the last (rounds.lua): a 0.2 s poll makes that 2 s, not the 10 s of a
        # 1 s poll, which this test spent waiting with nothing left to do.
        config = WorkerConfig(redis_url=server.url, namespace=namespace, concurrency=50,
                              maintenance_interval_seconds=0.2,
                              poll_interval_seconds=0.2)  # fmt: skip
        worker = Worker(config, functions)  # it applies the settings the pusher wrote
        running = asyncio.create_task(worker.run_async())

        async def drained_and_tidied() -> bool:
            stats = await queue.stats()
            ended = stats.counters.get("finished", 0) == 2000
            return ended and registry_sizes(sync) == [0, 0, 0]

        await until(drained_and_tidied, timeout=60)
        worker.stop()
        await running
        stats = await queue.stats()
        assert stats.states[TaskState.FINISHED] == 0  # counts hold no expired task
        assert stats.maintenance.rounds > 0
        assert stats.maintenance.dropped == 2000
        assert stats.maintenance.last_run_at is not None
        keys = sorted(
            key.decode() for key in sync.redis.scan_iter(f"fq:{{{namespace}}}:*", count=SCAN_COUNT)
        )
        # The fairness view's figures are per minute, and leave after 11 minutes.
        figures = [key for key in keys if key.startswith(sync.namespace.key("fairness:"))]
        assert 0 < len(figures) <= 4 * 11  # all, starts, waits, pending
        assert all(0 < sync.redis.ttl(key) <= 11 * 60 for key in figures)
        keys = [key for key in keys if key not in figures]
        # The pops' promise that nothing is due expires within a second.
        quiet = sync.namespace.key("maintenance:quiet")
        assert quiet not in keys or sync.redis.pttl(quiet) in (-2, *range(1001))  # -2: gone
        keys = [key for key in keys if key != quiet]
        # When the last idle wait ends: one key, kept (once idle, the worker wrote it).
        keys = [key for key in keys if key != sync.namespace.key("wakeups:until")]
        # What stays is per namespace and per tenant, never per task.
        # (No deps:cursor: with no deferred task its scan stays at 0, which is not written.)
        names = ("clock", "maintenance", "ready:total", "settings", "stats", "stats:tenants")
        assert keys == [sync.namespace.key(name) for name in names]
        held = sum(int(sync.redis.memory_usage(key) or 0) for key in keys)
        assert held < 10_000  # bytes, for 2,000 tasks processed
    finally:
        await queue.close()
        sync.close()


def test_rounds_run_once_per_interval_whoever_asks(
    make_queue: Callable[..., FairQueue],
) -> None:
    first, second = make_queue(), make_queue()
    assert first.maintain(interval=60).ran
    assert not second.maintain(interval=60).ran  # another process's round was recent
    assert not first.maintain(interval=60).ran
    assert second.reap().ran  # reap() runs a round now, whatever the interval
    assert second.stats().maintenance.rounds == 2


def test_a_round_is_bounded_and_the_next_one_goes_on(queue: FairQueue) -> None:
    settings_limit = QueueSettings(finished_ttl=0.001, maintenance_batch=1)  # 10 per round
    tight = FairQueue(namespace=queue.namespace.name, settings=settings_limit,
                      executor=queue.executor)  # fmt: skip
    tight.push_many([Task(user_id="u") for _ in range(25)])
    tight.finish_many(tight.pop(count=25))

    def expired() -> bool:
        seconds, micros = queue.redis.time()
        key = queue.namespace.key("state:finished")
        now = seconds * 1_000_000 + micros
        return int(queue.redis.zcount(key, f"({now}", "+inf")) == 0  # every entry expired

    wait_for(expired)
    rounds = [tight.maintain(interval=60) for _ in range(4)]
    assert [(done.ran, done.dropped, done.more) for done in rounds] == [
        (True, 10, True),
        (True, 10, True),  # a round that hit its bound makes the next one due at once
        (True, 5, False),
        (False, 0, False),
    ]
    assert registry_sizes(queue) == [0, 0, 0]


IDLE = WorkerInfo("idle-1", "host", 1, ("noop",), 1, 0, 0.0)
EVERY_TIME = 1e-6  # a round interval that makes a round due at each call


def test_an_idle_workers_round_is_light_until_ten_waits_after_a_full_one(
    queue: FairQueue,
) -> None:
    """The round in an idle worker's wait's upkeep (``upkeep`` with a wait, ``idle_pop``)
    reads no registry until the last full round is ten of its waits old; a busy worker's
    round is full."""
    quick = FairQueue(namespace=queue.namespace.name, settings=QueueSettings(finished_ttl=0.001),
                      executor=queue.executor)  # fmt: skip
    assert quick.maintain(interval=EVERY_TIME).ran  # a full round, before any task ended
    quick.push_many([Task(user_id="u", name="noop") for _ in range(3)])
    quick.finish_many(quick.pop(count=3))
    wait_for(lambda: expired_entries(queue) == 3)

    def idle_round(longest_wait: float) -> None:
        found = queue.upkeep(IDLE, 60.0, longest_wait=longest_wait, round_interval=EVERY_TIME)
        assert not found.round_due

    idle_round(3600.0)  # ten waits: ten hours
    leased, upkept = queue.idle_pop(
        0.001, 1, worker_id="idle-1", ttl=60.0, longest_wait=3600.0, round_interval=EVERY_TIME,
        lease_seconds=None, names=None,
    )  # fmt: skip
    assert not leased
    assert upkept is not None
    status = queue.stats().maintenance
    assert status.rounds == 3  # two light rounds ran
    assert status.dropped == 0
    assert status.last == Maintenance(0, 0, 0, 0)
    assert registry_sizes(queue) == [3, 0, 0]
    # Ten waits of a millisecond after the full round, the idle worker's round is full.
    full_at = int(queue.redis.hget(queue.namespace.key("maintenance"), "full_at") or 0)
    wait_for(lambda: server_now(queue) > full_at + 10_000)
    idle_round(0.001)
    assert queue.stats().maintenance.dropped == 3
    assert registry_sizes(queue) == [0, 0, 0]
    # A busy worker's round (no wait) is full whenever it is due.
    quick.push(Task(user_id="u", name="noop"))
    quick.finish_many(quick.pop(count=1))
    wait_for(lambda: expired_entries(queue) == 1)
    found = queue.upkeep(IDLE, 60.0, longest_wait=None, round_interval=EVERY_TIME)
    assert not found.round_due
    assert registry_sizes(queue) == [0, 0, 0]


def server_now(queue: FairQueue) -> int:
    """The server's clock (us), on the namespace's node."""
    seconds, micros = queue.executor.client_for(queue.namespace.key("maintenance")).time()
    return int(seconds) * 1_000_000 + int(micros)


def expired_entries(queue: FairQueue) -> int:
    """How many entries of the finished tasks' registry have expired."""
    key = queue.namespace.key("state:finished")
    return int(queue.redis.zcount(key, "-inf", server_now(queue)))


async def test_the_sharded_and_async_queues_maintain_every_shard(
    server: Server, namespace: str
) -> None:
    async with AsyncShardedQueue(server.url, namespace, shards=3) as sharded:
        done = await sharded.maintain(interval=60)
        assert done.ran
        assert not (await sharded.maintain(interval=60)).ran
        stats = await sharded.stats()
        assert stats.maintenance.rounds == 3
        assert stats.maintenance.last_run_at is not None
