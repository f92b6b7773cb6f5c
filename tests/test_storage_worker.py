"""Contract workers: round robin with batch sizes, handler stats, errors, graceful stop,
the Manager's rebalancing, on the in-memory storage and on the engine."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from fairque.errors import InvalidInput
from fairque.runners.manager import Manager, PlanHistory, plan_workers
from fairque.runners.storage_worker import (
    Handler,
    HandlerStats,
    QueueConfig,
    StorageWorker,
    StorageWorkerConfig,
)
from fairque.servers.embedded import LocalServer
from fairque.storage import (
    AsyncMemoryStorage,
    AsyncRedisStorage,
    AsyncStorage,
    PutTaskRequest,
    QueueReport,
    QueueStat,
    RetryInfo,
    Stats,
    WorkerReport,
)
from fairque.storage.contract import Contract
from fairque.storage.plan import decode_reports, encode_report

CONTRACT = Contract.from_yaml("""
queues:
  - {id: 1, name: emails, fields: {to: string, fail: bool}}
  - {id: 2, name: sms, fields: {to: string, fail: bool}}
  - {id: 3, name: unused, fields: {}}
""")


async def until(probe: Callable[[], Awaitable[bool] | bool], timeout: float = 10.0) -> None:
    """Polls ``probe`` until true; fails after ``timeout`` s."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = probe()
        if await value if asyncio.iscoroutine(value) else value:
            return
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        await asyncio.sleep(0.01)


class Recorder:
    """A handler: done for good tasks, retry in an hour for those with ``fail``."""

    def __init__(self) -> None:
        self.batches: list[tuple[str, list[Any]]] = []

    def __call__(self, name: str) -> Handler:
        async def handle(storage: AsyncStorage, tasks: list[Any]) -> HandlerStats:
            self.batches.append((name, tasks))
            good = [task.task_id for task in tasks if not task.fail]
            retries = [RetryInfo.after(task.task_id, 3600) for task in tasks if task.fail]
            await storage.done_task(good)
            await storage.retry_task(retries)
            return HandlerStats(
                processed=len(good),
                retried=len(retries),
                last_error="failed on purpose" if retries else None,
            )

        return handle


async def put(storage: AsyncStorage, queue: str, count: int, fail: bool = False) -> list[int]:
    contract = CONTRACT.queue(queue)
    requests = [contract.request({"to": f"n{i}", "fail": fail}) for i in range(count)]
    return await storage.put_tasks(requests)


async def run_until(worker: StorageWorker, probe: Callable[[], Awaitable[bool] | bool]) -> None:
    running = asyncio.create_task(worker.run())
    try:
        await until(probe)
    finally:
        worker.stop()
        await running


def config(**values: Any) -> StorageWorkerConfig:
    return StorageWorkerConfig(idle_wait=0.02, heartbeat=0.02, **values)


@pytest.fixture
async def redis_storage(server: LocalServer, namespace: str) -> AsyncIterator[AsyncRedisStorage]:
    async with AsyncRedisStorage(server.url, namespace) as storage:
        yield storage


async def test_round_robin_over_queues_with_their_batch_sizes() -> None:
    storage = AsyncMemoryStorage()
    await put(storage, "emails", 6)
    await put(storage, "sms", 6)
    recorder = Recorder()
    queues = {1: QueueConfig(batch_size=2), 2: QueueConfig(batch_size=3)}
    handlers: dict[int | str, Handler] = {"emails": recorder("emails"), 2: recorder("sms")}
    worker = StorageWorker(storage, CONTRACT, handlers, config(queues=queues))
    await run_until(worker, lambda: len(recorder.batches) == 5)
    sizes = [(name, len(tasks)) for name, tasks in recorder.batches]
    assert sizes == [("emails", 2), ("sms", 3), ("emails", 2), ("sms", 3), ("emails", 2)]
    assert worker.stats[1].processed == 6
    assert worker.stats[2].processed == 6
    assert (await storage.get_stat()).queues == {}


async def test_tasks_arrive_typed_and_handler_stats_add_up(
    redis_storage: AsyncRedisStorage,
) -> None:
    """On the engine, with two processors: every task once, typed, retries counted."""
    good = await put(redis_storage, "emails", 25)
    await put(redis_storage, "emails", 5, fail=True)
    recorder = Recorder()
    worker = StorageWorker(
        redis_storage, CONTRACT, {"emails": recorder("emails")}, config(max_processors=2)
    )
    await run_until(worker, lambda: worker.stats[1].handled == 30)
    tasks = [task for _, batch in recorder.batches for task in batch]
    assert sorted(task.task_id for task in tasks if not task.fail) == good
    assert {type(task).__name__ for task in tasks} == {"EmailsTask"}
    assert {task.attempts for task in tasks} == {0}
    stats = worker.stats[1]
    assert (stats.processed, stats.retried, stats.errors) == (25, 5, 0)
    assert stats.last_error == "failed on purpose"
    assert stats.duration > 0
    assert (await redis_storage.get_stat()).of(1) == QueueStat(1, total=5, delayed=5)


async def test_a_failing_handler_leaves_its_batch_to_the_visibility_timeout() -> None:
    storage = AsyncMemoryStorage()
    [task_id] = await put(storage, "emails", 1)
    calls: list[int] = []

    async def explode(storage: AsyncStorage, tasks: list[Any]) -> HandlerStats:
        calls.append(tasks[0].attempts)
        if len(calls) == 1:
            raise RuntimeError("boom")
        await storage.done_task([tasks[0].task_id])
        return HandlerStats(processed=1)

    worker = StorageWorker(storage, CONTRACT, {"emails": explode}, config(visibility_timeout=0.1))
    await run_until(worker, lambda: worker.stats[1].processed == 1)
    assert calls == [0, 1]  # back after the visibility timeout, attempts + 1
    assert worker.stats[1].errors == 1
    assert worker.stats[1].last_error == "RuntimeError: boom"
    assert await storage.done_task([task_id]) == 0


async def test_a_handler_that_returns_no_stats_is_counted_as_errors() -> None:
    storage = AsyncMemoryStorage()
    await put(storage, "emails", 2)

    async def forgetful(storage: AsyncStorage, tasks: list[Any]) -> Any:
        await storage.done_task([task.task_id for task in tasks])

    worker = StorageWorker(storage, CONTRACT, {"emails": forgetful}, config())
    await run_until(worker, lambda: worker.stats[1].errors == 2)
    assert worker.stats[1].last_error == "handler returned NoneType"


async def test_data_off_the_contract_comes_back_later_not_to_the_handler() -> None:
    storage = AsyncMemoryStorage()
    await storage.put_task(PutTaskRequest(1, b"\x93\x01\x02\x03"))
    recorder = Recorder()
    worker = StorageWorker(storage, CONTRACT, {"emails": recorder("emails")}, config())
    await run_until(worker, lambda: worker.stats[1].errors == 1)
    assert recorder.batches == []
    assert worker.stats[1].last_error == "data does not match the contract"
    assert (await storage.get_stat()).of(1) == QueueStat(1, total=1, delayed=1)


async def test_stop_lets_the_current_handler_call_finish() -> None:
    storage = AsyncMemoryStorage()
    await put(storage, "emails", 3)
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(storage: AsyncStorage, tasks: list[Any]) -> HandlerStats:
        entered.set()
        await release.wait()
        await storage.done_task([task.task_id for task in tasks])
        return HandlerStats(processed=len(tasks))

    worker = StorageWorker(storage, CONTRACT, {"emails": slow}, config())
    running = asyncio.create_task(worker.run())
    await entered.wait()
    worker.stop()
    await asyncio.sleep(0)
    assert not running.done()
    release.set()
    await running
    assert worker.stats[1].processed == 3
    assert (await storage.get_stat()).queues == {}


async def test_a_worker_that_always_finds_work_still_stops() -> None:
    """Every batch puts the next task: the queue is never empty, and stop still works."""
    storage = AsyncMemoryStorage()
    await put(storage, "emails", 1)
    emails = CONTRACT.queue("emails")

    async def forever(storage: AsyncStorage, tasks: list[Any]) -> HandlerStats:
        await storage.put_task(emails.request({"to": "again", "fail": False}))
        await storage.done_task([task.task_id for task in tasks])
        return HandlerStats(processed=len(tasks))

    worker = StorageWorker(storage, CONTRACT, {"emails": forever}, config())
    await run_until(worker, lambda: worker.stats[1].processed >= 50)
    assert (await storage.get_stat()).of(1).total == 1


async def test_slow_cycles_are_counted() -> None:
    storage = AsyncMemoryStorage()
    await put(storage, "emails", 2)
    recorder = Recorder()
    worker = StorageWorker(
        storage,
        CONTRACT,
        {"emails": recorder("emails")},
        config(slow_cycle=1e-9, queues={1: QueueConfig(batch_size=1)}),
    )
    await run_until(worker, lambda: worker.stats[1].processed == 2)
    assert worker.slow_cycles == 2


async def test_an_unreachable_storage_is_retried_until_stopped() -> None:
    async with AsyncRedisStorage("redis://127.0.0.1:1/0") as storage:
        worker = StorageWorker(storage, CONTRACT, {"emails": Recorder()("emails")}, config())
        await run_until(worker, lambda: worker.outages >= 2)
    assert worker.stats[1].handled == 0


def test_worker_settings_are_checked() -> None:
    storage = AsyncMemoryStorage()
    with pytest.raises(InvalidInput, match="at least one queue"):
        StorageWorker(storage, CONTRACT, {})
    with pytest.raises(InvalidInput, match="no queue 'fax'"):
        StorageWorker(storage, CONTRACT, {"fax": Recorder()("fax")})
    worker = StorageWorker(storage, CONTRACT, {"emails": Recorder()("emails")})
    with pytest.raises(InvalidInput, match="no handler for queue 2"):
        worker.assign([1, 2])


def test_worker_config_file(tmp_path: Any) -> None:
    path = tmp_path / "worker.yaml"
    path.write_text("max_processors: 3\nvisibility_timeout: 30\nqueues: {2: {batch_size: 50}}\n")
    loaded = StorageWorkerConfig.load(path)
    assert (loaded.max_processors, loaded.batch_size(2), loaded.batch_size(1)) == (3, 50, 10)
    path.write_text("max_processors: 0\n")
    with pytest.raises(InvalidInput) as caught:
        StorageWorkerConfig.load(path)
    assert caught.value.field == "max_processors"
    path.write_text("queues: [")
    with pytest.raises(InvalidInput, match="not valid YAML"):
        StorageWorkerConfig.load(path)
    with pytest.raises(InvalidInput, match="cannot read"):
        StorageWorkerConfig.load(tmp_path / "absent.yaml")
    path.write_text("heartbeat: 5\nheartbeat_ttl: 5\n")
    with pytest.raises(InvalidInput, match="heartbeat_ttl must be longer"):
        StorageWorkerConfig.load(path)


def one_worker(processors: int, ready: dict[int, int], **costs: tuple[int, float]) -> list[int]:
    """The plan of a lone worker serving ``ready``'s queues in batches of 10 (``costs``:
    ``q<queue>=(handled, seconds)``)."""
    figures = {queue: QueueReport(10, *costs.get(f"q{queue}", (0, 0.0))) for queue in ready}
    stats = Stats({queue: QueueStat(queue, count, count) for queue, count in ready.items()})
    return plan_workers([WorkerReport("w", processors, figures)], stats).get("w", [])


def test_plan_follows_backlog_and_cost() -> None:
    assert one_worker(4, {1: 0, 2: 0}) == []  # no backlog: no instruction
    assert one_worker(4, {1: 500, 2: 100, 3: 0}) == [1, 1, 1, 2]
    # A queue whose tasks take 20 times longer needs the processors more.
    assert one_worker(4, {1: 500, 2: 100}, q1=(100, 1.0), q2=(10, 2.0)) == [1, 2, 2, 2]
    # Never more processors than a queue has batches ready: the rest go round robin.
    assert one_worker(8, {1: 15, 2: 3}) == [1, 1, 2]


def test_plan_workers_splits_the_backlog_between_workers() -> None:
    both = {1: QueueReport(10), 2: QueueReport(10)}
    a, b = WorkerReport("a", 2, both), WorkerReport("b", 2, both)
    c = WorkerReport("c", 1, {3: QueueReport(10)})
    stats = Stats({1: QueueStat(1, 30, 30), 2: QueueStat(2, 5, 5)})
    # Queue 2 gets a processor, on the worker with more free; queue 1 the rest (3 batches);
    # c has no backlog: no instruction.
    assert plan_workers([c, b, a], stats) == {"a": [1, 1], "b": [1, 2]}
    # a claims queue 2's only batch: b goes round robin.
    assert plan_workers([a, b], Stats({2: QueueStat(2, 5, 5)})) == {"a": [2], "b": []}
    assert plan_workers([], stats) == {}


def test_every_queue_with_backlog_gets_a_processor_and_plans_hold_while_backlogs_do() -> None:
    """Two workers of two processors and three queues with backlog: each worker ranking
    the queues for itself gave both [1, 2], and queue 3 nothing for as long as that lasted;
    small changes in the backlogs moved processors from round to round."""
    three = {queue: QueueReport(10) for queue in (1, 2, 3)}
    workers = [WorkerReport("w1", 2, three), WorkerReport("w2", 2, three)]
    history = PlanHistory()
    plans = []
    for ready in ([760, 700, 760], [740, 690, 750], [700, 720, 730], [690, 700, 650]):
        stats = Stats({q: QueueStat(q, n, n) for q, n in zip((1, 2, 3), ready, strict=True)})
        plans.append(plan_workers(workers, stats, history))
    assert {queue for plan in plans[0].values() for queue in plan} == {1, 2, 3}
    assert all(len(plan) == 2 for plan in plans[0].values())
    assert plans == [plans[0]] * 4, plans


def test_with_more_queues_than_processors_each_waits_a_bounded_number_of_rounds() -> None:
    queues = {queue: QueueReport(10) for queue in range(1, 6)}
    workers = [WorkerReport("w1", 1, queues), WorkerReport("w2", 1, queues)]
    stats = Stats({queue: QueueStat(queue, 100 * queue, 100 * queue) for queue in queues})
    history = PlanHistory()
    served: list[set[int]] = []
    for _ in range(6):
        plan = plan_workers(workers, stats, history)
        assert sorted(len(queues) for queues in plan.values()) == [1, 1]
        served.append({queue for queues in plan.values() for queue in queues})
    # 5 queues, 2 processors: every queue within 3 rounds (ceil(5 / 2)), from any round on;
    # the most work first.
    assert served[0] == {5, 4}
    for first in range(4):
        assert set().union(*served[first : first + 3]) == set(queues), served


def test_reports_a_version_cannot_read_are_skipped() -> None:
    report = WorkerReport("w", 1, {1: QueueReport(10)})
    blobs = [b"\xc1", encode_report(WorkerReport("v", 2, {})), encode_report(report)]
    assert [r.worker_id for r in decode_reports(blobs)] == ["v", "w"]
    assert decode_reports([b"\x93\x01\x02\x03"]) == []


async def test_manager_moves_processors_to_the_backlog() -> None:
    storage = AsyncMemoryStorage()
    recorder = Recorder()
    handlers: dict[int | str, Handler] = {"emails": recorder("emails"), "sms": recorder("sms")}
    worker = StorageWorker(storage, CONTRACT, handlers, config(max_processors=1), worker_id="w")
    manager = Manager(storage, interval=0.01)
    assert await manager.rebalance() == {}  # no worker has beaten yet
    assert await storage.beat(worker.report(), 60) is None
    assert await manager.rebalance() == {}  # no backlog: no instruction
    await put(storage, "emails", 3)
    await put(storage, "sms", 30)
    assert await manager.rebalance() == {"w": [2]}
    # The worker takes the plan at its first beat: pinned to sms, it drains it and leaves
    # emails alone; its beats tell the Manager so.
    await run_until(worker, lambda: storage.storage.workers()[0].queues[2].handled == 30)
    assert worker.plan == [2]
    assert {name for name, _ in recorder.batches} == {"sms"}
    assert (await storage.get_stat()).of(1).ready == 3
    [report] = await storage.workers()
    assert (report.worker_id, report.plan, report.processors) == ("w", [2], 1)
    assert await storage.publish_plan({}) == 0
    assert await storage.beat(worker.report(), 60) is None  # no instruction
    worker.assign([])  # back to round robin, and no plan brings it back to sms
    await run_until(worker, lambda: worker.stats[1].processed == 3)
    assert worker.plan == []


async def test_a_manager_pins_every_queue_in_turn_with_fewer_processors_than_queues() -> None:
    """Two workers of one processor, three queues with backlog: the published plans reach
    every queue within two rounds, and the workers drain all three under the Manager."""
    storage = AsyncMemoryStorage()
    recorder = Recorder()
    handlers: dict[int | str, Handler] = {
        name: recorder(name) for name in ("emails", "sms", "unused")
    }
    workers = [
        StorageWorker(storage, CONTRACT, handlers, config(max_processors=1), worker_id=name)
        for name in ("w1", "w2")
    ]
    for worker in workers:
        await storage.beat(worker.report(), 60)
    await put(storage, "emails", 30)
    await put(storage, "sms", 20)
    await storage.put_tasks([CONTRACT.queue("unused").request({}) for _ in range(10)])
    manager = Manager(storage, interval=0.02)
    rounds = [await manager.rebalance() for _ in range(2)]
    assert {queue for plan in rounds for queues in plan.values() for queue in queues} == {1, 2, 3}
    managing = asyncio.create_task(manager.run())
    running = [asyncio.create_task(worker.run()) for worker in workers]
    try:
        await until(lambda: sum(len(tasks) for _, tasks in recorder.batches) == 60)
    finally:
        manager.stop()
        for worker in workers:
            worker.stop()
        await asyncio.gather(managing, *running)
    assert {name for name, _ in recorder.batches} == {"emails", "sms", "unused"}


async def test_a_worker_ignores_a_plan_for_queues_it_has_no_handler_for(
    caplog: pytest.LogCaptureFixture,
) -> None:
    storage = AsyncMemoryStorage()
    worker = StorageWorker(storage, CONTRACT, {"emails": Recorder()("emails")}, worker_id="w")
    await storage.beat(worker.report(), 60)
    await storage.publish_plan({"w": [2]})
    await run_until(worker, lambda: "ignoring the plan [2]" in caplog.text)
    assert worker.plan == []


async def test_manager_runs_until_stopped() -> None:
    storage = AsyncMemoryStorage()
    await put(storage, "sms", 5)
    handlers: dict[int | str, Handler] = {"emails": Recorder()("emails"), "sms": Recorder()("sms")}
    worker = StorageWorker(storage, CONTRACT, handlers, worker_id="w")
    await storage.beat(worker.report(), 60)
    manager = Manager(storage, interval=0.01)
    running = asyncio.create_task(manager.run())
    await until(lambda: storage.storage.read_plan() == {"w": [2]})
    manager.stop()
    await running


async def test_manager_waits_out_an_unreachable_storage() -> None:
    async with AsyncRedisStorage("redis://127.0.0.1:1/0") as storage:
        manager = Manager(storage, interval=0.01)
        running = asyncio.create_task(manager.run())
        await until(lambda: manager.outages >= 2)
        manager.stop()
        await running
