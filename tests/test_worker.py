"""The worker against real servers: each task runs once, timeouts, hand-back, wake-ups."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import pytest
import redis

from fairque import AsyncFairQueue, InvalidInput, LeasedTask, QueueSettings, Task, TaskState
from fairque.errors import ServerUnavailable
from fairque.servers.embedded import LocalServer
from fairque.worker import Registry, SyncTaskContext, Worker, WorkerConfig, task
from tests.conftest import until, wait_for

pytestmark = pytest.mark.cluster
T = TypeVar("T")

functions = Registry()
calls: list[Any] = []
release_blocked = threading.Event()


@task(into=functions, name="add")
def add(x: int, y: int) -> int:
    calls.append((x, y))
    return x + y


@task(into=functions, name="async_double")
async def async_double(x: int) -> int:
    calls.append(x)
    await asyncio.sleep(0)
    return 2 * x


@task(into=functions, name="flaky")
def flaky(key: str) -> str:
    calls.append(key)
    if calls.count(key) == 1:
        raise ValueError("first try fails")
    return "ok"


@task(into=functions, name="wait_forever")
async def wait_forever() -> None:
    calls.append("started")
    await asyncio.Event().wait()


@task(into=functions, name="outlast_the_timeout")
async def outlast_the_timeout() -> str:
    """Catches the cancellation its timeout sends, then goes on: a timed-out run's own
    code has the last word, as with asyncio.timeout."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        await asyncio.sleep(0)  # awaits after the cancellation: it must not come again
        return "went on"
    return "never"


@task(into=functions, name="block_thread")
def block_thread() -> None:
    release_blocked.wait(timeout=10)


@task(into=functions, name="slow")
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)  # the task's own work, not a wait for state
    calls.append("slow done")
    return "done"


@task(into=functions, name="in_process")
def in_process(context: SyncTaskContext) -> int:
    """Dies in its first run (process mode only); then stores its pid by XCom."""
    if context.task.attempts == 0:
        os._exit(3)
    context.xcom_push("pid", os.getpid())
    return os.getpid()


@task(into=functions, name="unsendable")
def unsendable() -> object:
    return object()


@task(into=functions, name="oversized")
async def oversized() -> str:
    return "x" * (1 << 20)  # over the namespace's max_payload_bytes, serialised


gates: dict[str, asyncio.Event] = {}


@task(into=functions, name="gated")
async def gated(name: str) -> str:
    await gates[name].wait()
    calls.append(name)
    return name


class HeldPops(AsyncFairQueue):
    """A real queue whose second pop is held until ``second`` is set, and which notes
    the count of each pop and the most pops in flight at once (a pop that carries
    acknowledgements, finish_and_pop, is a pop)."""

    def __init__(self, url: str, namespace: str) -> None:
        super().__init__(url, namespace)
        self.second = asyncio.Event()
        self.counts: list[int] = []
        self.in_flight = self.most_in_flight = 0

    async def pop(self, count: int = 1, *args: Any, **kwargs: Any) -> list[LeasedTask]:
        pop = super().pop
        return await self._held(count, lambda: pop(count, *args, **kwargs))

    async def finish_and_pop(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None, **kwargs: Any
    ) -> tuple[list[str], list[LeasedTask]]:
        finish_and_pop = super().finish_and_pop
        return await self._held(kwargs["count"], lambda: finish_and_pop(tasks, results, **kwargs))

    async def _held(self, count: int, call: Callable[[], Awaitable[T]]) -> T:
        self.counts.append(count)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            if len(self.counts) == 2:
                await self.second.wait()
            return await call()
        finally:
            self.in_flight -= 1


class CountedAcks(AsyncFairQueue):
    """A real queue that notes the tasks each call acknowledged (each call tried): alone
    (finish_many) or in a pop (finish_and_pop); and how many pops came back."""

    def __init__(self, url: str, namespace: str) -> None:
        super().__init__(url, namespace)
        self.alone: list[list[str]] = []
        self.with_pop: list[list[str]] = []
        self.pops_back = 0

    async def finish_many(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None
    ) -> list[str]:
        self.alone.append([task.task_id for task in tasks])
        return await super().finish_many(tasks, results)

    async def finish_and_pop(
        self, tasks: Sequence[LeasedTask], results: Sequence[Any] | None = None, **kwargs: Any
    ) -> tuple[list[str], list[LeasedTask]]:
        self.with_pop.append([task.task_id for task in tasks])
        answer = await super().finish_and_pop(tasks, results, **kwargs)
        self.pops_back += 1
        return answer

    async def pop(self, count: int = 1, *args: Any, **kwargs: Any) -> list[LeasedTask]:
        leased = await super().pop(count, *args, **kwargs)
        self.pops_back += 1
        return leased


@pytest.fixture(autouse=True)
def reset_calls() -> None:
    calls.clear()
    release_blocked.clear()


@pytest.fixture
async def pusher(server: LocalServer, namespace: str) -> AsyncIterator[AsyncFairQueue]:
    queue = AsyncFairQueue(server.url, namespace, settings=QueueSettings(retry_backoff_base=0.01))
    yield queue
    release_blocked.set()
    await queue.close()


def config(server: LocalServer, namespace: str, **values: Any) -> WorkerConfig:
    return WorkerConfig(redis_url=server.url, namespace=namespace, **values)


async def finished(queue: AsyncFairQueue, count: int) -> bool:
    return (await queue.stats()).counters.get("finished", 0) >= count


async def run_workers(workers: list[Worker], probe: Callable[[], Awaitable[bool]]) -> None:
    runs = [asyncio.create_task(worker.run_async()) for worker in workers]
    try:
        await until(probe)
    finally:
        for worker in workers:
            worker.stop()
        await asyncio.gather(*runs)


async def test_each_task_runs_once_with_several_workers(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    ids = await pusher.push_many(
        [add.build(user_id=f"u{i % 4}", args=[i, i], keep_result=True) for i in range(150)]
    )
    workers = [
        Worker(config(server, namespace, id=f"w{n}", concurrency=5), functions) for n in range(3)
    ]
    await run_workers(workers, lambda: finished(pusher, 150))
    assert sorted(calls) == [(i, i) for i in range(150)]
    info = await pusher.get(ids[7])
    assert info is not None
    assert (info.state, info.result, info.worker_id) == (TaskState.FINISHED, 14, info.worker_id)
    assert info.worker_id in {"w0", "w1", "w2"}
    assert sum(worker.finished for worker in workers) == 150


async def test_sync_and_async_functions_and_retries(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    double = await pusher.push(async_double.build(user_id="u", args=[21], keep_result=True))
    no_payload = await pusher.push(
        Task(user_id="u", name="wait_forever", timeout=0.05, max_retries=0)
    )
    retried = await pusher.push(flaky.build(user_id="u", kwargs={"key": "k"}, keep_result=True))
    worker = Worker(config(server, namespace), functions)
    await run_workers([worker], lambda: finished(pusher, 2))
    double_info, retried_info = await pusher.get(double), await pusher.get(retried)
    assert "started" in calls  # a task without a payload runs with no arguments
    assert no_payload
    assert double_info is not None
    assert retried_info is not None
    assert double_info.result == 42
    assert (retried_info.result, retried_info.attempts) == ("ok", 1)
    assert retried_info.last_error == "ValueError: first try fails"
    # A task that finished after a failed attempt keeps that attempt's error.
    [error] = retried_info.errors
    assert (error.attempt, error.type, error.message) == (
        1,
        "ValueError",
        "ValueError: first try fails",
    )
    assert error.worker_id == retried_info.worker_id  # the one worker ran both attempts
    assert error.traceback is not None
    assert 'in flaky\n    raise ValueError("first try fails")' in error.traceback


async def test_unknown_functions_and_bad_payloads_fail_without_retry(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    unknown = await pusher.push(Task(user_id="u", name="os.system", payload={"args": ["ls"]}))
    malformed = await pusher.push(Task(user_id="u", name="add", payload=[1, 2]))
    settings = config(server, namespace, hand_over_delay_seconds=0.05, unserved_grace_seconds=0.3)
    worker = Worker(settings, functions)

    async def both_failed() -> bool:
        return (await pusher.stats()).counters.get("failed", 0) == 2

    await run_workers([worker], both_failed)
    unknown_info, malformed_info = await pusher.get(unknown), await pusher.get(malformed)
    assert unknown_info is not None
    assert malformed_info is not None
    # Handed back until the grace ran out with no live worker serving it: never run.
    assert unknown_info.last_error == "no live worker serves os.system"
    assert unknown_info.attempts == 1
    assert malformed_info.last_error is not None
    assert "payload" in malformed_info.last_error
    assert calls == []


other_functions = Registry()


@task(into=other_functions, name="elsewhere")
async def elsewhere(marker: str) -> None:
    calls.append(marker)


async def test_a_task_goes_to_a_live_worker_that_serves_its_function(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    """Two deployments share a namespace: each task reaches a worker that has its
    function, with no attempt used, and both are listed in the registry."""
    calls.clear()
    tasks = [elsewhere.build(user_id=f"u{n}", args=[f"e{n}"]) for n in range(20)]
    tasks += [add.build(user_id=f"v{n}", args=[n, n]) for n in range(20)]
    await pusher.push_many(tasks)
    quick = {"hand_over_delay_seconds": 0.05, "maintenance_interval_seconds": 0.1}
    mine = Worker(config(server, namespace, id="mine", **quick), functions)
    theirs = Worker(config(server, namespace, id="theirs", **quick), other_functions)

    async def all_ran() -> bool:
        return await finished(pusher, 40)

    listed: list[list[str]] = []

    async def probe() -> bool:
        listed.append([worker.worker_id for worker in await pusher.workers()])
        return await all_ran()

    await run_workers([mine, theirs], probe)
    assert len(calls) == 40  # each task once, by the worker that has its function
    assert {call for call in calls if isinstance(call, str)} == {f"e{n}" for n in range(20)}
    assert ["mine", "theirs"] in listed
    stats = await pusher.stats()
    assert stats.counters.get("failed", 0) == 0
    assert (await pusher.workers()) == []  # both left the registry when they stopped


async def test_two_deployments_never_lease_each_others_tasks(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    """Disjoint functions in one namespace: once both are live, each worker's pops reach
    only its own names (their lanes): no task is handed over, and each runs its own."""
    calls.clear()
    mine = Worker(config(server, namespace, id="mine"), functions)
    theirs = Worker(config(server, namespace, id="theirs"), other_functions)
    pushed = False

    async def both_live_then_all_ran() -> bool:
        nonlocal pushed
        if not pushed:
            if len(await pusher.workers()) < 2:
                return False
            tasks = [elsewhere.build(user_id=f"u{n % 5}", args=[f"e{n}"]) for n in range(60)]
            tasks += [add.build(user_id=f"u{n % 5}", args=[n, n]) for n in range(60)]
            await pusher.push_many(tasks)
            pushed = True
        return await finished(pusher, 120)

    await run_workers([mine, theirs], both_live_then_all_ran)
    counters = (await pusher.stats()).counters
    assert counters.get("handed_over", 0) == 0
    assert counters["started"] == 120  # each task leased once, by a worker that runs it
    assert (mine.finished, theirs.finished) == (60, 60)


async def test_a_worker_without_functions_refuses_to_start(
    server: LocalServer, namespace: str
) -> None:
    with pytest.raises(InvalidInput, match="no task functions"):
        await Worker(config(server, namespace), Registry()).run_async()


async def test_a_task_over_its_timeout_fails_as_a_timeout(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    stuck = await pusher.push(wait_forever.build(user_id="u", timeout=0.2, max_retries=0))
    blocked = await pusher.push(block_thread.build(user_id="v", max_retries=0))
    # A lease of 1 s: the heartbeat (every 1/3 s) must keep it through a loaded cluster.
    worker = Worker(config(server, namespace, task_timeout_seconds=0.3, lease_seconds=1.0),
                    functions)  # fmt: skip
    run = asyncio.create_task(worker.run_async())

    async def overrun() -> bool:
        return any("past its timeout" in record.getMessage() for record in caplog.records)

    async def failed(count: int) -> bool:
        return (await pusher.stats()).counters.get("failed", 0) == count

    async def kept_past_its_first_deadline() -> bool:
        info = await pusher.get(blocked)
        assert info is not None
        assert info.state is TaskState.STARTED
        assert info.leased_at is not None
        assert info.lease_deadline is not None
        # Extended by a heartbeat sent after the first lease would have lapsed.
        return info.lease_deadline - info.leased_at > 2.0

    await until(overrun)
    # A thread cannot be stopped: past its timeout the task keeps its lease (extended by
    # the heartbeat) and is failed only when the function returns, so it cannot run again
    # meanwhile.
    await until(lambda: failed(1))
    await until(kept_past_its_first_deadline)
    release_blocked.set()
    await until(lambda: failed(2))
    worker.stop()
    await run
    stuck_info, blocked_info = await pusher.get(stuck), await pusher.get(blocked)
    assert stuck_info is not None
    assert blocked_info is not None
    assert (stuck_info.state, stuck_info.last_error) == (TaskState.FAILED, "timed out after 0.2 s")
    assert (blocked_info.state, blocked_info.last_error) == (
        TaskState.FAILED, "timed out after 0.3 s",
    )  # fmt: skip
    assert "expired" not in (await pusher.stats()).counters  # the lease was kept throughout


async def test_a_run_that_outlasts_its_timeout_cancellation_ends_as_it_returns(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    task_id = await pusher.push(outlast_the_timeout.build(user_id="u", timeout=0.05,
                                                          keep_result=True))  # fmt: skip
    after = await pusher.push(async_double.build(user_id="u", args=[21],
                                                 keep_result=True))  # fmt: skip
    worker = Worker(config(server, namespace, concurrency=1), functions)
    run = asyncio.create_task(worker.run_async())
    await until(lambda: finished(pusher, 2))  # the next run, on the same slot, went well
    worker.stop()
    await run
    ended = [await pusher.get(one) for one in (task_id, after)]
    assert [(info.state, info.result) for info in ended if info is not None] == [
        (TaskState.FINISHED, "went on"), (TaskState.FINISHED, 42),
    ]  # fmt: skip


async def test_stop_hands_running_tasks_back_at_once(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    task_id = await pusher.push(wait_forever.build(user_id="u"))
    worker = Worker(config(server, namespace, grace_seconds=0.05, lease_seconds=60,
                           concurrency=1), functions)  # fmt: skip

    async def started() -> bool:
        return calls == ["started"]

    await run_workers([worker], started)
    info = await pusher.get(task_id)
    assert info is not None
    assert (info.state, info.attempts) == (TaskState.QUEUED, 0)
    assert (await pusher.stats()).counters["released"] == 1


async def test_the_heartbeat_keeps_a_long_task_leased(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    # 2.5 lease periods long; beats every lease / 3, so a loaded machine has some slack.
    await pusher.push(slow.build(user_id="u", args=[2.0]))
    worker = Worker(config(server, namespace, lease_seconds=0.8), functions)
    rival = Worker(config(server, namespace, id="rival", lease_seconds=0.8), functions)
    await run_workers([worker, rival], lambda: finished(pusher, 1))
    assert calls == ["slow done"]
    assert "expired" not in (await pusher.stats()).counters


async def test_an_idle_worker_wakes_on_push(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    worker = Worker(config(server, namespace, poll_interval_seconds=60), functions)
    run = asyncio.create_task(worker.run_async())

    node = await pusher.executor.client_for(pusher.namespace.wake_channel)

    async def listening() -> bool:  # the worker waits in its pop, blocked on the wakeups token
        return bool((await node.info("clients"))["blocked_clients"])

    await until(listening)
    await pusher.push(add.build(user_id="u", args=[1, 2]))
    await until(lambda: finished(pusher, 1), timeout=5)  # far less than the 60 s poll
    await until(listening)  # idle again, for 60 s: the stop must end that wait
    worker.stop()
    await asyncio.wait_for(run, 10)


async def test_an_idle_worker_makes_no_call_while_it_waits(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    # Before a wait, one upkeep call; during it, nothing: no beat, no round, no poll. Its
    # maintenance interval would have it beat every 0.1 s if it were busy.
    settings = {"poll_interval_seconds": 3600, "maintenance_interval_seconds": 0.1}
    worker = Worker(config(server, namespace, **settings), functions)
    run = asyncio.create_task(worker.run_async())
    node = await pusher.executor.client_for(pusher.namespace.wake_channel)

    async def calls() -> int:
        stats = await node.info("commandstats")
        return sum(int(entry["calls"]) for name, entry in stats.items() if "fcall" in name)

    async def waiting() -> bool:
        return bool((await node.info("clients"))["blocked_clients"])

    await until(waiting)
    before = await calls()
    await asyncio.sleep(1.0)  # an observation window (ten maintenance intervals), not a wait
    assert await calls() == before
    assert [w.worker_id for w in await pusher.workers()] == [worker.config.id]  # registered
    await pusher.push(add.build(user_id="u", args=[1, 2], delay=0.3))  # due during the wait
    await until(lambda: finished(pusher, 1), timeout=10)  # far less than the hour
    worker.stop()
    await asyncio.wait_for(run, 10)


async def test_an_idle_worker_makes_one_call_a_wait(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    # Its pop behind each wait, finding nothing, is also its upkeep for the next wait and
    # runs the round (due at each wait here): it made an upkeep, a round and the pop.
    settings = {"poll_interval_seconds": 0.2, "maintenance_interval_seconds": 0.1}
    worker = Worker(config(server, namespace, **settings), functions)
    node = await pusher.executor.client_for(pusher.namespace.wake_channel)

    async def calls() -> tuple[int, int]:
        # Script calls that ran: a library's first call fails (the server lacks its
        # function), and the call is sent again behind its FUNCTION LOAD.
        stats = await node.info("commandstats")
        scripts = sum(
            int(entry["calls"]) - int(entry.get("failed_calls", 0))
            for name, entry in stats.items()
            if "fcall" in name
        )
        return scripts, int(stats.get("cmdstat_blpop", {}).get("calls", 0))

    _, before = await calls()  # the server's, from the tests before this one
    run = asyncio.create_task(worker.run_async())
    await until(lambda: rounds_at_least(pusher, 1))
    first_rounds = (await pusher.stats()).maintenance.rounds  # a script call: not counted
    # Counted from its third wait: before its first, the worker's start makes calls of its
    # own (its first pop and upkeep, and its maintenance loop's beats until it is idle),
    # as many as a slow machine lets in.
    await until(lambda: waits_at_least(calls, before + 2), timeout=30)
    scripts, waits = await calls()
    await until(lambda: waits_at_least(calls, waits + 6), timeout=30)
    more_scripts, more_waits = await calls()
    # One call a wait; one more where the count began between a wait and its call.
    assert more_scripts - scripts <= more_waits - waits + 1
    assert await rounds_at_least(pusher, first_rounds + 3)  # the rounds ran all the same
    assert [w.worker_id for w in await pusher.workers()] == [worker.config.id]
    worker.stop()
    await asyncio.wait_for(run, 10)


async def rounds_at_least(queue: AsyncFairQueue, count: int) -> bool:
    return (await queue.stats()).maintenance.rounds >= count


async def waits_at_least(calls: Callable[[], Awaitable[tuple[int, int]]], count: int) -> bool:
    return (await calls())[1] >= count


@pytest.mark.one_engine
async def test_a_worker_whose_server_refuses_its_wait_still_runs_tasks(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    # An ACL without BLPOP: each idle pop's wait fails at once, and the pop behind it runs
    # as a plain pop; the worker pauses between two such pops instead of spinning.
    admin = redis.Redis.from_url(server.url)
    admin.acl_setuser("no-blpop", enabled=True, passwords=["+pw"], keys=["*"],
                      channels=["*"], commands=["+@all", "-blpop"])  # fmt: skip
    try:
        url = server.url.replace("redis://", "redis://no-blpop:pw@")
        worker = Worker(WorkerConfig(redis_url=url, namespace=namespace, poll_interval_seconds=60),
                        functions)  # fmt: skip
        run = asyncio.create_task(worker.run_async())
        for n in range(3):
            await pusher.push(add.build(user_id="u", args=[n, n]))
            await until(lambda done=n + 1: finished(pusher, done))  # type: ignore[misc]
        worker.stop()
        await asyncio.wait_for(run, 10)
    finally:
        admin.acl_deluser("no-blpop")
        admin.close()
    assert sorted(calls) == [(0, 0), (1, 1), (2, 2)]


async def test_assigned_users_only(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    await pusher.push_many([add.build(user_id=user, args=[n, 0]) for n, user in enumerate("abab")])
    worker = Worker(config(server, namespace, assigned_users=["a"]), functions)
    await run_workers([worker], lambda: finished(pusher, 2))
    assert sorted(calls) == [(0, 0), (2, 0)]
    assert (await pusher.stats()).tenants["b"].queued == 2


async def test_a_result_that_cannot_be_sent_fails_its_task_alone(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    """A result MessagePack cannot carry, or over the namespace's size limit, is refused
    with the batch of acknowledgements it is in, before anything is written: its task
    fails, and the others of the batch are finished all the same."""
    bad = await pusher.push_many([unsendable.build(user_id="u"), oversized.build(user_id="u")])
    good = await pusher.push_many([add.build(user_id="v", args=[i, i]) for i in range(4)])
    worker = Worker(config(server, namespace, concurrency=6), functions)

    async def settled() -> bool:
        counters = (await pusher.stats()).counters
        return (counters.get("finished", 0), counters.get("failed", 0)) == (4, 2)

    await run_workers([worker], settled)
    assert (worker.finished, worker.failed) == (4, 2)
    errors = []
    for task_id in bad:
        info = await pusher.get(task_id)
        assert info is not None
        assert info.state is TaskState.FAILED
        errors.append(info.last_error)
    assert errors[0] is not None
    assert errors[0].startswith("result refused: result: cannot be serialised with MessagePack")
    assert errors[1] is not None
    assert errors[1].startswith("result refused: result: refused by the server")
    for task_id in good:
        info = await pusher.get(task_id)
        assert info is not None
        assert info.state is TaskState.FINISHED


async def test_a_slot_freed_while_a_pop_is_in_flight_gets_a_pop_at_once(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    # Concurrency 2: "a" and "b" run; "a" ends, and the worker pops for its slot (a pop
    # held in flight); "b" ends meanwhile: its slot gets a second pop at once, whose task
    # starts before the first pop is back. Never more leased than slots.
    gates.update({name: asyncio.Event() for name in "abcd"})
    await pusher.push_many([gated.build(user_id="u", args=[name]) for name in "abcd"])
    queue = HeldPops(server.url, namespace)
    worker = Worker(config(server, namespace, concurrency=2), functions, queue=queue)
    run = asyncio.create_task(worker.run_async())
    try:
        await until(lambda: _true(len(queue.counts) == 1 and queue.in_flight == 0))
        gates["a"].set()
        await until(lambda: _true(len(queue.counts) == 2))
        gates["b"].set()
        await until(lambda: _true(len(queue.counts) == 3 and queue.in_flight == 1))
        gates["c"].set()  # the second pop's task: it runs while the first pop is held
        await until(lambda: _true(calls == ["a", "b", "c"]))
        queue.second.set()
        gates["d"].set()
        await until(lambda: finished(pusher, 4))
    finally:
        for gate in gates.values():
            gate.set()
        worker.stop()
        await asyncio.wait_for(run, 10)
        await queue.close()
    assert queue.counts[:3] == [2, 1, 1]
    assert queue.most_in_flight == 2
    assert calls == ["a", "b", "c", "d"]


async def test_the_pops_carry_the_acknowledgements(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    """Each task's end frees its slot, and the pop for that slot carries its
    acknowledgement: one call per task, none for the acknowledgement alone (the last
    task's pop finds nothing)."""
    ids = await pusher.push_many([async_double.build(user_id="u", args=[n]) for n in range(5)])
    queue = CountedAcks(server.url, namespace)
    worker = Worker(config(server, namespace, concurrency=1), functions, queue=queue)
    try:
        await run_workers([worker], lambda: finished(pusher, 5))
    finally:
        await queue.close()
    assert queue.with_pop == [[task_id] for task_id in ids]
    assert queue.alone == []
    assert worker.finished == 5


async def test_an_acknowledgement_no_pop_would_carry_goes_alone(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    """An idle worker sends no pop: the acknowledgements of the tasks it still runs go
    on their own, at once, not with a pop that is not coming."""
    gates.update({name: asyncio.Event() for name in "ab"})
    ids = await pusher.push_many([gated.build(user_id="u", args=[name]) for name in "ab"])
    queue = CountedAcks(server.url, namespace)
    worker = Worker(config(server, namespace, concurrency=3, poll_interval_seconds=60), functions,
                    queue=queue)  # fmt: skip
    run = asyncio.create_task(worker.run_async())
    try:
        # Its first pop leased both, its second found nothing: it waits for work now.
        await until(lambda: _true(queue.pops_back == 2))
        for done, (name, task_id) in enumerate(zip("ab", ids, strict=True), 1):
            gates[name].set()
            await until(lambda done=done: finished(pusher, done))  # type: ignore[misc]
            assert queue.alone[-1] == [task_id]
        assert queue.pops_back == 2  # no pop came meanwhile (the stop ends the idle one)
    finally:
        for gate in gates.values():
            gate.set()
        worker.stop()
        await asyncio.wait_for(run, 10)
        await queue.close()
    assert queue.with_pop == []
    assert worker.finished == 2


async def test_acknowledgements_in_a_pop_the_outage_stopped_are_sent_later(
    namespace: str,
) -> None:
    """The server goes away while a task runs: the pop that carries its acknowledgement
    fails, the acknowledgement is kept, and sent once the server is back."""
    gates["a"] = asyncio.Event()
    with LocalServer(appendonly=True) as own:
        pusher = AsyncFairQueue(own.url, namespace)
        first, second = await pusher.push_many(
            [gated.build(user_id="u", args=["a"]), add.build(user_id="u", args=[1, 2])]
        )
        queue = CountedAcks(own.url, namespace)
        worker = Worker(config(own, namespace, concurrency=1, poll_interval_seconds=0.1),
                        functions, queue=queue)  # fmt: skip
        run = asyncio.create_task(worker.run_async())
        try:
            await until(lambda: _true(queue.pops_back == 1))  # "a" runs, its slot busy
            own.stop()
            gates["a"].set()
            await until(lambda: _true(bool(queue.with_pop)))  # its pop went, and failed
            await until(lambda: worker_saw_outage(worker), timeout=10)
            own.start()
            await until(lambda: finished(pusher, 2), timeout=20)
        finally:
            gates["a"].set()
            worker.stop()
            await asyncio.wait_for(run, 20)
            await queue.close()
        states = [info.state if (info := await pusher.get(i)) else None for i in (first, second)]
        await pusher.close()
    assert queue.with_pop[0] == [first]
    assert states == [TaskState.FINISHED, TaskState.FINISHED]
    assert calls == ["a", (1, 2)]  # each ran once
    assert worker.finished == 2


async def _true(value: bool) -> bool:
    return value


def test_the_registry_refuses_a_second_function_under_one_name() -> None:
    registry = Registry()

    @task(into=registry, name="same")
    def first() -> None: ...

    with pytest.raises(Exception, match="same"):

        @task(into=registry, name="same")
        def second() -> None: ...

    assert registry.get("same") is first
    assert first.build(user_id="u").name == "same"


async def test_the_worker_carries_on_after_a_server_restart(namespace: str) -> None:
    with LocalServer(appendonly=True) as own:
        queue = AsyncFairQueue(own.url, namespace)
        worker = Worker(config(own, namespace, poll_interval_seconds=0.1), functions)
        run = asyncio.create_task(worker.run_async())
        await queue.push(add.build(user_id="u", args=[1, 1]))
        await until(lambda: finished(queue, 1))
        own.stop()
        await until(lambda: worker_saw_outage(worker), timeout=10)
        own.start()
        await queue.push(add.build(user_id="u", args=[2, 2]))  # reconnects by itself
        await until(lambda: finished(queue, 2), timeout=20)
        worker.stop()
        await run
        await queue.close()
    assert calls == [(1, 1), (2, 2)]


async def worker_saw_outage(worker: Worker) -> bool:
    return worker.outages > 0


async def worker_saw_outage_or_ended(worker: Worker, run: asyncio.Task[None]) -> bool:
    return worker.outages > 0 or run.done()


async def test_the_worker_waits_while_its_master_is_a_replica(namespace: str) -> None:
    """A failover demotes the master the worker talks to (READONLY): the worker waits it
    out like an outage, and serves again once the node is a master."""
    # The other node sends its data at once (not after the default 5 s wait for more replicas).
    with LocalServer() as own, LocalServer(options=["--repl-diskless-sync-delay", "0"]) as other:
        queue = AsyncFairQueue(own.url, namespace)
        worker = Worker(config(own, namespace, poll_interval_seconds=0.1), functions)
        run = asyncio.create_task(worker.run_async())
        await queue.push(add.build(user_id="u", args=[1, 1]))
        await until(lambda: finished(queue, 1))
        with redis.Redis.from_url(own.url) as admin:
            admin.replicaof("127.0.0.1", other.port)
            wait_for(lambda: admin.info("replication")["master_link_status"] == "up")
            with pytest.raises(ServerUnavailable, match="is failing over"):  # not a script's
                await queue.push(add.build(user_id="u", args=[0, 0]))
            await until(lambda: worker_saw_outage_or_ended(worker, run), timeout=10)
            if run.done():  # it should have waited: fail with what ended it
                raise AssertionError("the worker ended in the failover") from run.exception()
            admin.replicaof("NO", "ONE")
        await queue.push(add.build(user_id="u", args=[2, 2]))
        await until(lambda: finished(queue, 1), timeout=20)  # on the other node's data
        worker.stop()
        await run
        await queue.close()
    assert calls == [(1, 1), (2, 2)]


@pytest.mark.one_engine  # task processes run functions only: the same on every engine
async def test_process_mode_runs_sync_functions_in_task_processes(
    pusher: AsyncFairQueue, server: LocalServer, namespace: str
) -> None:
    dying = await pusher.push(in_process.build(user_id="u", keep_result=True, max_retries=1))
    unsent = await pusher.push(unsendable.build(user_id="v", max_retries=3))
    summed = await pusher.push(add.build(user_id="w", args=[2, 3], keep_result=True))
    raised = await pusher.push(add.build(user_id="x", args=[2, None], max_retries=0))
    worker = Worker(config(server, namespace, sync_runner="process", concurrency=2), functions)

    async def settled() -> bool:
        counters = (await pusher.stats()).counters
        return (counters.get("finished", 0), counters.get("failed", 0)) == (2, 2)

    run = asyncio.create_task(worker.run_async())
    await until(settled, timeout=60)  # starting task processes takes seconds on a busy host
    worker.stop()
    await run
    dying_info, unsent_info, summed_info = [await pusher.get(i) for i in (dying, unsent, summed)]
    assert dying_info is not None
    assert unsent_info is not None
    assert summed_info is not None
    assert summed_info.result == 5
    assert calls == []  # add ran in a task process, not here
    # A process that dies fails its run (retried); the next run has a new process and its
    # context reaches XCom.
    assert (dying_info.attempts, dying_info.last_error) == (
        1, "the task process ended (exit code 3)",
    )  # fmt: skip
    assert dying_info.result not in (None, os.getpid())
    assert await pusher.xcom_pull(dying, "pid") == dying_info.result
    # A result MessagePack cannot carry fails the task without a retry (of its 3).
    assert (unsent_info.state, unsent_info.attempts) == (TaskState.FAILED, 1)
    assert unsent_info.last_error is not None
    assert unsent_info.last_error.startswith("result: cannot be serialised with MessagePack")
    # An exception in a task process reaches the task with its type and traceback.
    raised_info = await pusher.get(raised)
    assert raised_info is not None
    [error] = raised_info.errors
    assert error.type == "TypeError"
    assert error.traceback is not None
    assert "in add\n    return x + y" in error.traceback


async def test_process_mode_refuses_functions_it_cannot_import(
    server: LocalServer, namespace: str
) -> None:
    local = Registry()

    @task(into=local, name="local")
    def inner() -> None: ...

    worker = Worker(config(server, namespace, sync_runner="process"), local)
    with pytest.raises(InvalidInput, match=r"'local' .* cannot be imported by name"):
        await worker.run_async()
