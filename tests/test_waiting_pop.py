"""A pop that waits for work (``pop(wait=...)``): the wake-up token it blocks on, and
what it returns, on every engine (a cluster client sends the wait, then the pop)."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import threading
import time
from collections.abc import Callable

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError

from fairque import (
    AsyncFairQueue,
    FairQueue,
    InvalidInput,
    LeasedTask,
    QueueSettings,
    Task,
    TaskState,
)
from fairque.queue.models import WorkerInfo
from fairque.servers.embedded import LocalServer
from tests.conftest import REDIS, namespace_keys, until, wait_for

pytestmark = pytest.mark.cluster


def token(queue: FairQueue) -> int:
    """How many wake-up tokens the namespace holds (0 or 1)."""
    return int(queue.redis.llen(queue.namespace.key("wakeups:any")))


def blocked(queue: FairQueue) -> bool:
    """True once a client waits on the server (on a cluster, on the namespace's node)."""
    node = queue.executor.client_for(queue.namespace.key("ring"))
    return bool(node.info("clients")["blocked_clients"])


def test_the_token_follows_whether_a_tenant_may_be_served(queue: FairQueue) -> None:
    assert token(queue) == 0
    queue.set_tenant("held", paused=True)
    queue.push(Task(user_id="held", payload=0))
    assert token(queue) == 0  # nobody may serve it: no wake-up
    queue.push_many([Task(user_id=f"u{i}", payload=i) for i in range(3)])
    queue.push(Task(user_id="u0", payload=3))
    assert token(queue) == 1  # one token however many pushes
    assert len(queue.pop(count=2)) == 2
    assert token(queue) == 1  # work is left: passed on to the next waiting worker
    assert len(queue.pop(count=10)) == 2
    assert token(queue) == 0  # the ring is empty: no wake-up would find work
    queue.set_tenant("held", paused=False)
    assert token(queue) == 1


def test_a_pop_that_waits_returns_at_once_when_work_is_ready(queue: FairQueue) -> None:
    queue.push(Task(user_id="u", payload="ready"))
    started = time.monotonic()
    [leased] = queue.pop(wait=30)
    assert leased.payload == "ready"
    assert time.monotonic() - started < 10  # far below the wait
    assert token(queue) == 0


def test_a_pop_that_waits_gets_what_is_pushed_meanwhile(
    make_queue: Callable[..., FairQueue],
) -> None:
    consumer, producer = make_queue(), make_queue()
    got: list[list[LeasedTask]] = []
    waiting = threading.Thread(target=lambda: got.append(consumer.pop(count=5, wait=30)))
    waiting.start()
    wait_for(lambda: blocked(producer))
    producer.push_many([Task(user_id="a", payload=1), Task(user_id="b", payload=2)])
    waiting.join(timeout=20)
    assert not waiting.is_alive()
    assert sorted(task.payload for task in got[0]) == [1, 2]


def test_a_pop_that_waits_for_nothing_returns_empty_after_its_wait(queue: FairQueue) -> None:
    queue.stats()  # the first call records the data format: what is there from then on
    before = namespace_keys(queue.redis, queue.namespace.name)
    started = time.monotonic()
    assert queue.pop(count=3, wait=0.2) == []
    assert time.monotonic() - started >= 0.15
    assert namespace_keys(queue.redis, queue.namespace.name) == before


def test_a_wait_has_no_timeout_on_the_server_the_client_ends_it(
    make_queue: Callable[..., FairQueue],
) -> None:
    # A client blocked with a timeout costs the server a look at its timeouts at every
    # turn of its event loop; one blocked for ever, none. The client ends the wait.
    consumer, other = make_queue(), make_queue()
    waiting = threading.Thread(target=lambda: consumer.pop(wait=0.5))
    waiting.start()
    wait_for(lambda: blocked(other))
    node = other.executor.client_for(other.namespace.key("ring"))
    assert int(node.info("clients")["clients_in_timeout_table"]) == 0
    waiting.join(timeout=20)
    assert not waiting.is_alive()  # ended by the client after its half second
    assert not blocked(other)


def test_stop_waiting_ends_a_wait_at_once(make_queue: Callable[..., FairQueue]) -> None:
    consumer, other = make_queue(), make_queue()
    got: list[list[LeasedTask]] = []
    waiting = threading.Thread(target=lambda: got.append(consumer.pop(wait=60)))
    waiting.start()
    wait_for(lambda: blocked(other))
    consumer.stop_waiting()
    waiting.join(timeout=10)
    assert got == [[]]


@pytest.mark.parametrize("wait", [0, -1, 3601, math.nan])
def test_a_wait_out_of_bounds_is_refused(queue: FairQueue, wait: float) -> None:
    queue.push(Task(user_id="u"))
    with pytest.raises(InvalidInput, match="wait"):
        queue.pop(wait=wait)
    assert queue.stats().tenants["u"].queued == 1


def test_a_waiting_pop_loads_its_script_where_the_server_lost_it(queue: FairQueue) -> None:
    queue.push(Task(user_id="u", payload="x"))
    queue.redis.function_flush()  # on a cluster, redis-py sends it to every primary
    [leased] = queue.pop(wait=5)
    assert leased.payload == "x"


async def test_the_async_client_waits_and_stops_waiting(aqueue: AsyncFairQueue) -> None:
    waiting = asyncio.create_task(aqueue.pop(wait=60))
    node = await aqueue.executor.client_for(aqueue.namespace.key("ring"))

    async def blocked_now() -> bool:
        return bool((await node.info("clients"))["blocked_clients"])

    await until(blocked_now)
    await aqueue.stop_waiting()
    assert await asyncio.wait_for(waiting, 10) == []
    await aqueue.push(Task(user_id="u", payload=7))
    [leased] = await aqueue.pop(wait=60)
    assert leased.payload == 7


async def test_closing_idle_connections_keeps_the_wait_and_the_calls_go_on(
    aqueue: AsyncFairQueue,
) -> None:
    # The server pays for each open connection every second: an idle worker closes the
    # pooled ones no call holds. The wait's connection stays and still pops what is pushed.
    node = await aqueue.executor.client_for(aqueue.namespace.key("ring"))
    waiting = asyncio.create_task(aqueue.pop(wait=60))

    async def blocked_ids() -> set[int]:
        return {int(c["id"]) for c in await node.client_list() if "b" in c["flags"]}

    async def waits() -> bool:
        return bool(await blocked_ids())

    await until(waits)
    [waiting_id] = await blocked_ids()
    free = set(await asyncio.gather(*(node.client_id() for _ in range(3))))
    await aqueue.executor.close_idle_connections()
    open_ids = {int(c["id"]) for c in await node.client_list()}
    assert waiting_id in open_ids
    assert free
    assert not free & open_ids
    await aqueue.push(Task(user_id="u", payload=7))
    [leased] = await asyncio.wait_for(waiting, 10)
    assert leased.payload == 7


async def test_a_stop_ends_a_wait_that_the_server_has_not_seen_yet(aqueue: AsyncFairQueue) -> None:
    waiting = asyncio.create_task(aqueue.pop(wait=60))
    await asyncio.sleep(0)  # the pop starts and sends its pipeline; its reply is not read yet
    await aqueue.stop_waiting()
    assert await asyncio.wait_for(waiting, 10) == []


@pytest.mark.parametrize("engine", ["valkey", "redis"])
def test_a_wait_on_a_node_demoted_meanwhile_ends_as_an_outage(engine: str, namespace: str) -> None:
    # A failover makes the node a replica, which ends every blocked client's wait
    # (UNBLOCKED, or the connection closed): an outage the worker waits out, never a
    # script's error.
    if engine == "redis" and REDIS is None:
        pytest.skip("no redis-server")
    binary = REDIS if engine == "redis" else None
    with LocalServer(binary) as own, LocalServer(binary) as other:
        queue, admin = FairQueue(own.url, namespace), FairQueue(own.url, namespace)
        raised: list[BaseException] = []

        def pop() -> None:
            try:
                queue.pop(wait=30)
            except BaseException as exc:  # what it raised is the point
                raised.append(exc)

        waiting = threading.Thread(target=pop)
        waiting.start()
        wait_for(lambda: blocked(admin))
        admin.redis.replicaof("127.0.0.1", other.port)
        waiting.join(timeout=10)
        admin.redis.replicaof("NO", "ONE")
        queue.close()
        admin.close()
    assert len(raised) == 1
    assert isinstance(raised[0], ReadOnlyError | RedisConnectionError)


def test_a_pop_behind_a_wait_that_failed_still_counts(queue: FairQueue) -> None:
    # The wait is a signal: when it fails (here the token's key was overwritten), the pop
    # behind it has run all the same, and what it leased is returned, not lost.
    queue.push(Task(user_id="u", payload="kept"))
    queue.redis.set(queue.namespace.key("wakeups:any"), "not a list")
    [leased] = queue.pop(wait=1)
    assert leased.payload == "kept"
    assert queue.redis.exists(queue.namespace.key("wakeups:any")) == 0  # the ring is empty


@pytest.mark.one_engine
async def test_stop_waiting_without_the_right_to_unblock_lets_the_wait_run_out(
    server: LocalServer, namespace: str
) -> None:
    admin = redis.Redis.from_url(server.url)
    admin.acl_setuser("no-client", enabled=True, passwords=["+pw"], keys=["*"],
                      channels=["*"], commands=["+@all", "-client"])  # fmt: skip
    url = server.url.replace("redis://", "redis://no-client:pw@")
    try:
        sync_queue = FairQueue(url, namespace)
        sync_queue.stop_waiting()  # nothing waits: nothing to do
        started = time.monotonic()
        got: list[list[LeasedTask]] = []
        waiting = threading.Thread(target=lambda: got.append(sync_queue.pop(wait=0.3)))
        waiting.start()
        wait_for(lambda: bool(admin.info("clients")["blocked_clients"]))
        sync_queue.stop_waiting()  # refused (NOPERM): the wait goes on to its end
        waiting.join(timeout=10)
        assert got == [[]]
        assert time.monotonic() - started >= 0.25
        sync_queue.close()
        async_queue = AsyncFairQueue(url, namespace)
        pending = asyncio.create_task(async_queue.pop(wait=0.3))

        async def blocked_now() -> bool:
            return bool(admin.info("clients")["blocked_clients"])

        await until(blocked_now)
        await async_queue.stop_waiting()
        assert await asyncio.wait_for(pending, 10) == []
        await async_queue.close()
    finally:
        admin.acl_deluser("no-client")
        admin.close()


def test_a_waiting_pop_wakes_when_a_delayed_task_comes_due(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="u", delay=0.5))
    started = time.monotonic()
    [leased] = queue.pop(count=1, wait=60)
    assert leased.task_id == task_id
    # Due after 0.5 s; without a wake for it the pop would sleep its whole minute.
    assert time.monotonic() - started < 30


async def test_a_waiting_pop_wakes_when_a_rate_window_opens(aqueue: AsyncFairQueue) -> None:
    await aqueue.set_tenant("u", rate=1, period=0.5)
    first, second = [await aqueue.push(Task(user_id="u")) for _ in range(2)]
    [leased] = await aqueue.pop(count=2)
    assert leased.task_id == first  # the window allows one start per half second
    started = time.monotonic()
    [leased] = await aqueue.pop(count=1, wait=60)
    assert leased.task_id == second
    assert time.monotonic() - started < 30


def test_a_waiting_pop_woken_for_due_work_it_cannot_take_waits_on(
    make_queue: Callable[..., FairQueue],
) -> None:
    consumer, other = make_queue(), make_queue()
    consumer.set_tenant("u", concurrency=1)
    consumer.push(Task(user_id="u"))
    [running] = other.pop()  # u is at its limit while this runs
    consumer.push(Task(user_id="u", delay=0.3))
    got: list[list[LeasedTask]] = []
    waiting = threading.Thread(target=lambda: got.append(consumer.pop(wait=60)))
    waiting.start()
    # At 0.3 s the waiting pop wakes and makes the task ready, which u may not start yet...
    wait_for(lambda: other.stats().states[TaskState.QUEUED] == 1, timeout=30)
    wait_for(lambda: blocked(other), timeout=30)  # ...so it waits on
    assert waiting.is_alive()
    pushed = other.push(Task(user_id="v"))
    waiting.join(timeout=30)
    assert [task.task_id for task in got[0]] == [pushed]
    other.finish(running)


# An idle worker's wait (fairque/runners/fair_worker/fetch.py): its upkeep says when work
# comes due, then it waits that long at most, here far longer than any test.
IDLE = WorkerInfo("idle-1", "host", 1, ("job",), 1, 0, 0.0)
LONG_WAIT = 3600.0


def idle_wait(queue: FairQueue) -> threading.Thread:
    """Starts an idle worker's wait as the worker makes it, in a thread."""
    found = queue.upkeep(IDLE, 60.0, longest_wait=LONG_WAIT, rewrite=False, names=["job"])
    assert not found.ready  # nothing to take, and nothing due for long (a busy lease)
    assert found.next_due is None or found.next_due > LONG_WAIT / 2
    wait = LONG_WAIT if found.next_due is None else found.next_due
    waiting = threading.Thread(
        target=lambda: queue.pop_after_wait(wait, 1, worker_id="idle-1", names=["job"])
    )
    waiting.start()
    wait_for(lambda: blocked(queue))
    return waiting


# Each way work comes due without a push of ready work: what comes before the wait, and
# what happens during it (another client's call).
def delayed_push(queue: FairQueue) -> Callable[[], object]:
    return lambda: queue.push(Task(user_id="a", name="job", delay=0.5))


def retry_after_backoff(queue: FairQueue) -> Callable[[], object]:
    queue.push(Task(user_id="a", name="job"))
    [leased] = queue.pop(worker_id="busy", names=["job"], lease_seconds=3000)
    return lambda: queue.fail(leased, "boom")  # retried after its backoff, 0.5 s


def rate_window(queue: FairQueue) -> Callable[[], object]:
    queue.set_tenant("a", rate=1, period=5.0)
    queue.push(Task(user_id="a", name="job"))
    queue.pop(worker_id="busy", names=["job"], lease_seconds=3000)  # the window's one start
    return lambda: queue.push(Task(user_id="a", name="job"))  # ready when the window opens


@pytest.mark.parametrize("case", [delayed_push, retry_after_backoff, rate_window])
def test_work_coming_due_before_an_idle_workers_wait_ends_wakes_it(
    make_queue: Callable[..., FairQueue], case: Callable[[FairQueue], Callable[[], object]]
) -> None:
    # Added by another client while the worker waits: without a wake-up, the worker would
    # see it only after its wait (an hour here).
    waiter = make_queue()
    other = make_queue(settings=QueueSettings(retry_backoff_base=0.5))
    during_the_wait = case(other)
    waiting = idle_wait(waiter)
    during_the_wait()
    waiting.join(timeout=20)
    assert not waiting.is_alive()  # woken: the wait ended long before its hour
    found = waiter.upkeep(IDLE, 60.0, longest_wait=LONG_WAIT, rewrite=False, names=["job"])
    assert found.next_due is not None
    assert found.next_due <= 5.0  # the next wait ends then


def test_an_idle_worker_is_not_woken_for_work_due_after_its_wait(
    make_queue: Callable[..., FairQueue],
) -> None:
    waiter, other = make_queue(), make_queue()
    found = waiter.upkeep(IDLE, 60.0, longest_wait=1.0, rewrite=False, names=["job"])
    assert found.next_due is None
    other.push(Task(user_id="a", name="job", delay=60))  # after the wait's end
    assert waiter.redis.llen(waiter.namespace.lane_key("job", "wakeups")) == 0
    other.push(Task(user_id="a", name="job", delay=0.5))  # before it
    assert waiter.redis.llen(waiter.namespace.lane_key("job", "wakeups")) == 1


def test_an_upkeep_keeps_a_worker_registered_and_writes_its_record_once(
    queue: FairQueue,
) -> None:
    first = queue.upkeep(IDLE, 60.0, longest_wait=None, rewrite=False, names=["job"])
    assert not first.registered  # registered now, with its record
    [listed] = queue.workers()
    assert (listed.worker_id, listed.functions) == ("idle-1", ("job",))
    busier = dataclasses.replace(IDLE, in_flight=3)
    assert queue.upkeep(busier, 60.0, longest_wait=None, rewrite=False).registered
    [again] = queue.workers()
    assert again.in_flight == 0  # the record stays: only its expiry moved
    assert again.seen_at >= listed.seen_at  # seen at the last upkeep
    queue.upkeep(busier, 60.0, longest_wait=None, rewrite=True)
    assert queue.workers()[0].in_flight == 3
    queue.unregister_worker("idle-1")
    assert not queue.upkeep(IDLE, 60.0, longest_wait=None, rewrite=False).registered


def test_an_idle_pop_that_leases_nothing_is_the_upkeep_of_the_next_wait(queue: FairQueue) -> None:
    # One call a wait for an idle worker: its pop keeps it registered, runs the round if
    # one is due, says when work comes due, and notes the next wait's end.
    queue.upkeep(IDLE, 60.0, longest_wait=None, rewrite=False, names=["job"])
    expiries = queue.namespace.key("workers:expiry")
    registered_until = queue.redis.zscore(expiries, "idle-1")
    queue.push(Task(user_id="a", name="job", delay=30))
    rounds = queue.stats().maintenance.rounds
    leased, found = queue.idle_pop(
        0.01, 1, worker_id="idle-1", ttl=600.0, longest_wait=LONG_WAIT, round_interval=0.001,
        names=["job"],
    )  # fmt: skip
    assert leased == []
    assert found is not None
    assert (found.registered, found.ready, found.round_due) == (True, False, False)
    assert found.next_due is not None
    assert 20 < found.next_due <= 30
    moved_to = queue.redis.zscore(expiries, "idle-1")
    assert registered_until is not None
    assert moved_to is not None
    assert moved_to > registered_until + 500e6  # 600 s from now, not 60
    assert queue.stats().maintenance.rounds == rounds + 1
    [listed] = queue.workers()
    assert listed.functions == ("job",)  # the record stays as the upkeep wrote it
    queue.push(Task(user_id="b", name="job", delay=0.5))  # due before the next wait ends
    assert queue.redis.llen(queue.namespace.lane_key("job", "wakeups")) == 1


def test_an_idle_pop_that_leases_nothing_sets_no_quiet_mark(queue: FairQueue) -> None:
    # The mark spares the pops of the next second their housekeeping; an idle worker's
    # next pop comes a wait later, so its writing it would be a command for nothing.
    queue.upkeep(IDLE, 60.0, longest_wait=None, rewrite=False, names=["job"])
    queue.push(Task(user_id="a", name="job", delay=30))  # a head the mark would last until
    quiet = queue.namespace.key("maintenance:quiet")
    queue.redis.delete(quiet)
    leased, found = queue.idle_pop(
        0.01, 1, worker_id="idle-1", ttl=60.0, longest_wait=LONG_WAIT, round_interval=2.0,
        names=["job"],
    )  # fmt: skip
    assert leased == []
    assert found is not None
    assert found.next_due is not None  # the heads were read
    assert not queue.redis.exists(quiet)


def test_an_idle_pop_does_not_register_a_worker_again(queue: FairQueue) -> None:
    # A stopping worker leaves the registry while its last wait ends: that wait's pop
    # must not bring it back. A worker not registered makes an upkeep call instead.
    queue.upkeep(IDLE, 60.0, longest_wait=None, rewrite=False, names=["job"])
    queue.unregister_worker("idle-1")
    _, found = queue.idle_pop(
        0.01, 1, worker_id="idle-1", ttl=60.0, longest_wait=1.0, round_interval=2.0,
        names=["job"],
    )  # fmt: skip
    assert found is not None
    assert not found.registered
    assert queue.workers() == []


def test_an_idle_pop_that_leases_is_only_a_pop(queue: FairQueue) -> None:
    pushed = queue.push(Task(user_id="a", name="job"))
    rounds = queue.stats().maintenance.rounds
    leased, found = queue.idle_pop(
        60.0, 2, worker_id="idle-1", ttl=60.0, longest_wait=1.0, round_interval=0.001,
        names=["job"],
    )  # fmt: skip
    assert [task.task_id for task in leased] == [pushed]
    assert found is None
    assert queue.stats().maintenance.rounds == rounds


@pytest.mark.parametrize(
    ("field", "value"), [("ttl", 0.0), ("longest_wait", -1.0), ("round_interval", 4000.0)]
)
def test_an_idle_pop_out_of_bounds_is_refused(queue: FairQueue, field: str, value: float) -> None:
    arguments = {"worker_id": "idle-1", "ttl": 60.0, "longest_wait": 1.0, "round_interval": 2.0}
    with pytest.raises(InvalidInput, match=field):
        queue.idle_pop(1.0, 1, **{**arguments, field: value})  # type: ignore[arg-type]


def test_an_upkeep_given_the_round_interval_runs_a_round_that_is_due(queue: FairQueue) -> None:
    rounds = queue.stats().maintenance.rounds
    found = queue.upkeep(IDLE, 60.0, longest_wait=None, round_interval=3600.0)
    assert not found.round_due  # it ran, and did not hit its bound
    assert queue.stats().maintenance.rounds == rounds + 1
    again = queue.upkeep(IDLE, 60.0, longest_wait=None, round_interval=3600.0)
    assert not again.round_due
    assert queue.stats().maintenance.rounds == rounds + 1  # not due for an hour
    assert queue.upkeep(IDLE, 60.0, longest_wait=None, round_interval=None).round_due is False
