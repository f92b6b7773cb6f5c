"""Task headers (small strings carried with a task to its worker) and the client hooks
that see each task before it is pushed, on one namespace and on a sharded queue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fairque import (
    AsyncFairQueue,
    AsyncShardedQueue,
    ClientHooks,
    FairQueue,
    InvalidInput,
    QueueSettings,
    ShardedQueue,
    Task,
)
from fairque.queue.client import open_queue
from fairque.queue.models import MAX_HEADER_VALUE, MAX_HEADERS
from tests.conftest import Server, wait_for

HEADERS = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
           "tracestate": "vendor=é,x=1", "1": "", "a.b_c-D": "x" * MAX_HEADER_VALUE}  # fmt: skip


def test_headers_come_back_from_pop_and_get(queue: FairQueue) -> None:
    with_headers = queue.push(Task(user_id="alice", name="n", headers=HEADERS))
    without = queue.push(Task(user_id="alice", name="n"))
    leased = {task.task_id: task.headers for task in queue.pop(count=2)}
    assert leased == {with_headers: HEADERS, without: {}}
    for task_id, headers in leased.items():
        info = queue.get(task_id)
        assert info is not None
        assert info.headers == headers


def test_a_task_without_headers_stores_no_field(queue: FairQueue) -> None:
    task_id = queue.push(Task(user_id="alice"))
    assert not queue.redis.hexists(queue.namespace.key(f"task:{task_id}"), "headers")


def test_a_retried_task_keeps_its_headers(make_queue: Callable[..., FairQueue]) -> None:
    queue = make_queue(QueueSettings(retry_backoff_base=0.001))
    task_id = queue.push(Task(user_id="alice", headers={"request": "r-17"}))
    [first] = queue.pop()
    queue.fail(first, "boom")
    again = wait_for(queue.pop)  # once its backoff, a millisecond, has passed
    assert (again[0].task_id, again[0].attempts, again[0].headers) == (
        task_id, 1, {"request": "r-17"},
    )  # fmt: skip


@pytest.mark.cluster
def test_headers_on_a_sharded_queue(server: Server, namespace: str) -> None:
    with ShardedQueue(server.url, namespace, shards=3) as queue:
        tasks = [Task(user_id=f"tenant-{n}", headers={"n": str(n)}) for n in range(6)]
        ids = queue.push_many(tasks)
        ids.append(queue.push(Task(user_id="tenant-6", headers={"n": "6"})))
        got = [queue.get(task_id) for task_id in ids]
        assert [info.headers if info else None for info in got] == [{"n": str(n)} for n in range(7)]
        leased = queue.pop(count=7)
        assert sorted(int(task.headers["n"]) for task in leased) == list(range(7))


@pytest.mark.parametrize(
    ("headers", "words"),
    [
        ({"bad name": "x"}, "a name must be 1 to 64 letters, digits"),
        ({"": "x"}, "a name must be 1 to 64"),
        ({"n" * 65: "x"}, "a name must be 1 to 64"),
        ({"n": 1}, "n: must be a string, got int"),
        ({"n": "x" * (MAX_HEADER_VALUE + 1)}, "n: must be at most 8192 characters"),
        ({"n": "\ud800"}, "n: must be text that UTF-8 can encode"),
        ({f"h{n}": "" for n in range(MAX_HEADERS + 1)}, "must hold at most 32 entries"),
        ("traceparent", "must map names to strings, got str"),
    ],
)
def test_bad_headers_are_refused_naming_the_field(headers: Any, words: str) -> None:
    with pytest.raises(InvalidInput, match=words) as raised:
        Task(user_id="alice", headers=headers)
    assert raised.value.field == "headers"


class Tagging(ClientHooks):
    """Adds a header to every task, and notes each task it saw."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def before_push(self, task: Task) -> Task:
        self.seen.append(task.user_id)
        return task.model_copy(update={"headers": {**task.headers, "tag": task.user_id}})


class Refusing(ClientHooks):
    def before_push(self, task: Task) -> Task:
        if task.user_id == "mallory":
            raise PermissionError("mallory may not push")
        return task


class Unchecked(ClientHooks):
    """Makes a copy that bypasses validation (``model_copy`` checks nothing)."""

    def before_push(self, task: Task) -> Task:
        return task.model_copy(update={"headers": {"bad name": "x"}})


def test_push_hooks_see_each_task_once(server: Server, namespace: str) -> None:
    hooks = Tagging()
    with FairQueue(server.url, namespace, hooks=hooks) as queue:
        one = queue.push(Task(user_id="a", headers={"kept": "1"}))
        many = queue.push_many([Task(user_id="b"), Task(user_id="c")])
        assert hooks.seen == ["a", "b", "c"]
        infos = [queue.get(task_id) for task_id in [one, *many]]
        assert [info.headers if info else None for info in infos] == [
            {"kept": "1", "tag": "a"}, {"tag": "b"}, {"tag": "c"},
        ]  # fmt: skip


async def test_async_push_hooks_see_each_task_once(server: Server, namespace: str) -> None:
    hooks = Tagging()
    queue = AsyncFairQueue(server.url, namespace, hooks=hooks)
    one = await queue.push(Task(user_id="a"))
    many = await queue.push_many([Task(user_id="b"), Task(user_id="c")])
    assert hooks.seen == ["a", "b", "c"]
    leased = {task.task_id: task.headers for task in await queue.pop(count=3)}
    await queue.close()
    assert leased == {one: {"tag": "a"}, many[0]: {"tag": "b"}, many[1]: {"tag": "c"}}


@pytest.mark.cluster
async def test_sharded_push_hooks_see_each_task_once(server: Server, namespace: str) -> None:
    hooks = Tagging()
    queue = AsyncShardedQueue(server.url, namespace, shards=3, hooks=hooks)
    tenants = [f"tenant-{n}" for n in range(4)]
    await queue.push_many([Task(user_id=tenant) for tenant in tenants[:3]])
    await queue.shard_for(tenants[3]).push(Task(user_id=tenants[3]))  # a shard: the same hooks
    assert hooks.seen == tenants
    leased = await queue.pop(count=4)
    await queue.close()
    assert sorted(task.headers["tag"] for task in leased) == tenants


def test_open_queue_passes_the_hooks_on(server: Server, namespace: str) -> None:
    hooks = Tagging()
    for shards in (1, 2):
        with open_queue(server.url, f"{namespace}-{shards}", shards, hooks=hooks) as queue:
            queue.push(Task(user_id=f"s{shards}"))
    assert hooks.seen == ["s1", "s2"]


def test_a_hook_that_raises_makes_the_push_raise(queue: FairQueue) -> None:
    with FairQueue(executor=queue.executor, namespace=queue.name, hooks=Refusing()) as guarded:
        with pytest.raises(PermissionError, match="mallory"):
            guarded.push(Task(user_id="mallory"))
        with pytest.raises(PermissionError):  # before anything is sent: nothing is pushed
            guarded.push_many([Task(user_id="alice"), Task(user_id="mallory")])
    assert queue.stats().counters.get("pushed", 0) == 0


async def test_headers_a_hook_made_are_checked_when_pushed(server: Server, namespace: str) -> None:
    queue = AsyncFairQueue(server.url, namespace, hooks=Unchecked())
    with pytest.raises(InvalidInput, match="a name must be") as raised:
        await queue.push(Task(user_id="alice"))
    assert raised.value.field == "headers"
    await queue.close()
