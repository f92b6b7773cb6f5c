"""Results you can wait for: ``queue.result(task_id, timeout)`` returns a kept result when
the task ends, raises ``TaskFailed`` / ``ResultNotKept`` / ``ResultTimeout`` /
``TaskNotFound``, and is woken by the script that ends the task, not by polling."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fairque import (
    AsyncFairQueue,
    AsyncShardedQueue,
    FairQueue,
    InvalidInput,
    ResultNotKept,
    ResultTimeout,
    ShardedQueue,
    Task,
    TaskFailed,
    TaskNotFound,
)
from fairque.engine.notify import AsyncListener, Listener
from fairque.engine.outage import OUTAGE
from fairque.servers.embedded import LocalServer, free_port
from tests.conftest import Server, wait_for


@pytest.fixture
def no_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    """Waiters never re-read on their own: only the end message can wake them in time."""
    monkeypatch.setattr("fairque.queue.client.RECHECK_SECONDS", 3600.0)


def _subscribers(queue: FairQueue) -> int:
    channel = queue.namespace.ended_channel
    return int(queue.redis.pubsub_shardnumsub(channel)[0][1])


class Waiter:
    """``queue.result`` running in a thread: its value or its exception."""

    def __init__(self, wait: Callable[[], Any]) -> None:
        self.value: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(wait,))
        self.thread.start()

    def _run(self, wait: Callable[[], Any]) -> None:
        try:
            self.value = wait()
        except BaseException as exc:  # handed to the test thread
            self.error = exc

    def join(self) -> Waiter:
        self.thread.join(timeout=60)
        assert not self.thread.is_alive()
        return self


@pytest.fixture
def waiters() -> Iterator[list[Waiter]]:
    started: list[Waiter] = []
    yield started
    for waiter in started:
        waiter.thread.join(timeout=60)


@pytest.mark.cluster
@pytest.mark.usefixtures("no_recheck")
def test_a_waiter_gets_the_result_when_the_task_finishes(
    make_queue: Callable[..., FairQueue], waiters: list[Waiter]
) -> None:
    queue, other = make_queue(), make_queue()
    task_id = queue.push(Task(user_id="alice", keep_result=True, payload=1))
    waiter = Waiter(lambda: other.result(task_id, timeout=30))
    waiters.append(waiter)
    wait_for(lambda: _listening(queue))
    [leased] = queue.pop()
    queue.finish(leased, result={"pages": 3})
    assert waiter.join().error is None
    assert waiter.value == {"pages": 3}


def _listening(queue: FairQueue) -> bool:
    from redis.cluster import RedisCluster

    if isinstance(queue.redis, RedisCluster):  # asked where the channel's slot lives
        channel = queue.namespace.ended_channel
        node = queue.redis.get_node_from_key(channel)  # type: ignore[no-untyped-call]
        reply = queue.redis.pubsub_shardnumsub(channel, target_nodes=node)
        return int(reply[0][1]) > 0
    return _subscribers(queue) > 0


@pytest.mark.usefixtures("no_recheck")
def test_one_batch_wakes_the_waiter_of_each_of_its_tasks(
    make_queue: Callable[..., FairQueue], waiters: list[Waiter]
) -> None:
    queue = make_queue()
    ids = queue.push_many([Task(user_id="bob", keep_result=True, payload=n) for n in range(3)])

    def waiting_for(task_id: str) -> Callable[[], Any]:
        return lambda: make_queue().result(task_id, timeout=30)

    waiters.extend(Waiter(waiting_for(task_id)) for task_id in ids)
    wait_for(lambda: _subscribers(queue) == 3)
    leased = queue.pop(count=3)
    queue.finish_many(leased, [task.payload * 10 for task in leased])
    assert [waiter.join().value for waiter in waiters] == [0, 10, 20]


def test_an_ended_task_answers_at_once(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="u", keep_result=True))
    [leased] = queue.pop()
    queue.finish(leased, result="done")
    assert queue.result(task_id, timeout=0) == "done"
    assert queue.result(task_id) == "done"  # kept: asked again, the same answer
    assert _subscribers(queue) == 0  # no subscription for what has ended


def test_a_finished_task_without_a_result_gives_none(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="u", keep_result=True))
    [leased] = queue.pop()
    queue.finish(leased)
    assert queue.result(task_id, timeout=1) is None


@pytest.mark.usefixtures("no_recheck")
def test_a_task_that_fails_for_good_raises_task_failed_with_its_error(
    make_queue: Callable[..., FairQueue], waiters: list[Waiter]
) -> None:
    queue = make_queue()
    task_id = queue.push(Task(user_id="u", keep_result=True, max_retries=1))
    waiter = Waiter(lambda: make_queue().result(task_id, timeout=30))
    waiters.append(waiter)
    wait_for(lambda: _subscribers(queue) == 1)
    [leased] = queue.pop()
    queue.fail(leased, "first try", retry=True)  # a retry: not the end, the waiter waits
    assert waiter.thread.is_alive()
    retried = wait_for(queue.pop, timeout=10)  # after the 1 s backoff
    queue.fail(retried[0], "ValueError: bad page")
    error = waiter.join().error
    assert isinstance(error, TaskFailed)
    assert (error.task_id, error.state, error.error) == (task_id, "failed", "ValueError: bad page")
    assert "ValueError: bad page" in str(error)


def test_a_canceled_task_raises_task_failed(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="u", keep_result=True, delay=60))
    assert queue.cancel(task_id)
    with pytest.raises(TaskFailed) as failed:
        queue.result(task_id, timeout=1)
    assert failed.value.state == "canceled"


def test_a_task_pushed_without_keep_result_says_so(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="u"))
    with pytest.raises(ResultNotKept, match="keep_result=True"):
        queue.result(task_id, timeout=5)
    assert _subscribers(queue) == 0  # refused before waiting


def test_a_timeout_names_the_state(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="u", keep_result=True))
    with pytest.raises(ResultTimeout) as timed_out:
        queue.result(task_id, timeout=0.2)
    assert timed_out.value.state == "queued"
    assert isinstance(timed_out.value, TimeoutError)
    assert _subscribers(queue) == 0  # the subscription ended with the wait


def test_unknown_ids_and_bad_timeouts_are_refused(queue: FairQueue) -> None:
    with pytest.raises(TaskNotFound):
        queue.result("no-such-task", timeout=1)
    with pytest.raises(InvalidInput, match="timeout"):
        queue.result("x", timeout=-1)


@pytest.mark.usefixtures("no_recheck")
async def test_the_asyncio_queue_waits_the_same_way(
    aqueue: AsyncFairQueue, server: Server, namespace: str
) -> None:
    task_id = await aqueue.push(Task(user_id="alice", keep_result=True, payload=2))
    async with AsyncFairQueue(server.url, namespace) as waiting:
        result = asyncio.create_task(waiting.result(task_id, timeout=30))
        blocking = FairQueue(server.url, namespace)
        try:
            await asyncio.to_thread(wait_for, lambda: _subscribers(blocking) == 1)
        finally:
            blocking.close()
        [leased] = await aqueue.pop()
        await aqueue.finish(leased, result=[leased.payload])
        assert await result == [2]
        failing = await aqueue.push(Task(user_id="alice", keep_result=True, max_retries=0))
        [leased] = await aqueue.pop()
        await aqueue.fail(leased, "boom")
        with pytest.raises(TaskFailed, match="boom"):
            await waiting.result(failing)
        with pytest.raises(ResultTimeout):
            await waiting.result(await aqueue.push(Task(user_id="a", keep_result=True)), 0.1)


@pytest.mark.usefixtures("no_recheck")
def test_a_sharded_queue_waits_on_the_shard_that_holds_the_task(
    server: Server, namespace: str, waiters: list[Waiter]
) -> None:
    with ShardedQueue(server.url, namespace, shards=3) as queue:
        task_id = queue.push(Task(user_id="erin", keep_result=True, payload=5))
        shard = queue.shard_for("erin")

        def wait() -> Any:
            with ShardedQueue(server.url, namespace, shards=3) as waiting:
                return waiting.result(task_id, 30)

        waiter = Waiter(wait)
        waiters.append(waiter)
        wait_for(lambda: _subscribers(shard) == 1)
        [leased] = queue.pop()
        queue.finish(leased, result="five")
        assert waiter.join().value == "five"
        with pytest.raises(TaskNotFound):
            queue.result("nowhere", timeout=1)


async def test_an_asyncio_sharded_queue_waits_too(server: Server, namespace: str) -> None:
    async with AsyncShardedQueue(server.url, namespace, shards=2) as queue:
        task_id = await queue.push(Task(user_id="erin", keep_result=True))
        waiting = asyncio.create_task(queue.result(task_id, timeout=30))
        leased: list[Any] = []
        while not leased:  # the waiter subscribes meanwhile; the result comes either way
            leased = await queue.pop()
        await queue.finish(leased[0], result=7)
        assert await waiting == 7


def test_a_listener_reads_only_the_messages_of_its_channel(
    queue: FairQueue, make_queue: Callable[..., FairQueue]
) -> None:
    other = make_queue()
    with Listener(queue.executor, queue.namespace.ended_channel) as listener:
        task_id = other.push(Task(user_id="u", keep_result=True))
        assert not listener.wait_for(task_id, 0.05)  # pushed: nothing ended
        [leased] = other.pop()
        other.finish(leased)
        assert listener.wait_for(task_id, 10)


async def test_a_listener_whose_reopening_met_an_outage_says_so_until_it_is_open_again() -> None:
    # A worker reopens its wake subscription when it failed; a reopening during the
    # outage (its node not yet replaced) must leave it failed, or the worker would wait
    # for wake-ups with no subscription, hearing of work only at its poll.
    port = free_port()
    server = LocalServer(port=port).start()
    try:
        async with AsyncShardedQueue(server.url, "listened", shards=2) as queue:
            listener = await AsyncListener(queue.executor, *queue.wake_channels).open()

            def failed() -> bool:
                return listener.failed

            try:
                assert not failed()
                server.stop()
                await asyncio.to_thread(wait_for, failed, 30)
                with pytest.raises(OUTAGE):
                    await listener.reopen()
                assert failed()
                server.start()  # back, on the same port
                await listener.reopen()
                assert not failed()
                channel = queue.wake_channels[1]
                await queue.executor.client.execute_command("SPUBLISH", channel, "lane")
                message = await listener.next_message(10)
                assert message is not None
                assert message["channel"] in (channel, channel.encode())
            finally:
                await listener.close()
    finally:
        server.close()
