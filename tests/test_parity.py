"""Sync / async parity: every blocking client has an asyncio twin with the same public
methods and signatures, and both build the same script call for the same arguments.

The facades hold no logic; these tests keep them from drifting apart (an earlier
implementation of these seeds had an async client that sent the wrong number of script
arguments). No server is needed: a recording executor stands in for the connection and
stops each method at its first call.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest

from fairque import (
    AsyncFairQueue,
    AsyncJobQueue,
    AsyncMemoryStorage,
    AsyncRedisStorage,
    AsyncShardedQueue,
    AsyncTaskScheduler,
    Constraint,
    FairQueue,
    Job,
    JobQueue,
    Matcher,
    MemoryStorage,
    PutTaskRequest,
    RedisStorage,
    RetryInfo,
    ShardedQueue,
    Task,
    TaskScheduler,
)
from fairque.engine.calls import Call
from fairque.jobs import LeasedJob, Success
from fairque.queue import LeasedTask, Priority, Selector, WorkerInfo
from fairque.storage import AsyncTarantoolStorage, QueueReport, TarantoolStorage, WorkerReport

PAIRS: list[tuple[type[Any], type[Any]]] = [
    (FairQueue, AsyncFairQueue),
    (ShardedQueue, AsyncShardedQueue),
    (JobQueue, AsyncJobQueue),
    (TaskScheduler, AsyncTaskScheduler),
    (RedisStorage, AsyncRedisStorage),
    (MemoryStorage, AsyncMemoryStorage),
    (TarantoolStorage, AsyncTarantoolStorage),
]
# Where the twins differ on purpose: the blocking scheduler's run() is a process's main
# loop, so it handles SIGTERM by default; the asyncio one runs inside someone's loop.
DIFFERENT_DEFAULTS = {("TaskScheduler", "run", "handle_signals")}
CONTEXT = {"__enter__": "__aenter__", "__exit__": "__aexit__"}


# Methods that do no I/O, plain functions in both twins.
NO_IO = {"shard_for", "stop"}


def _public(cls: type[Any]) -> dict[str, Any]:
    """The methods a user calls, context managers included."""
    return {
        name: member
        for name, member in inspect.getmembers(cls, callable)
        if not name.startswith("_") or name in CONTEXT or name in CONTEXT.values()
    }


@pytest.mark.parametrize(("blocking", "asyncio"), PAIRS, ids=lambda cls: cls.__name__)
def test_twins_have_the_same_methods_and_signatures(
    blocking: type[Any], asyncio: type[Any]
) -> None:
    sync_methods = _public(blocking)
    async_methods = _public(asyncio)
    names = {CONTEXT.get(name, name) for name in sync_methods}
    assert names == set(async_methods)
    for name, method in sync_methods.items():
        twin = async_methods[CONTEXT.get(name, name)]
        if name in CONTEXT:
            continue  # their signatures are Python's
        is_async = inspect.iscoroutinefunction(twin)
        assert is_async == (name not in NO_IO), f"{asyncio.__name__}.{name}"
        expected = inspect.signature(method).parameters
        actual = inspect.signature(twin).parameters
        assert list(expected) == list(actual), name
        for parameter, given in expected.items():
            other = actual[parameter]
            if parameter == "self":  # typed as the twin itself where it is typed at all
                continue
            assert (given.kind, given.annotation) == (other.kind, other.annotation), name
            if (blocking.__name__, name, parameter) not in DIFFERENT_DEFAULTS:
                assert given.default == other.default, (name, parameter)


class Sent(Exception):  # noqa: N818 - control flow of the recorder, never seen by users
    """Raised by the recorder once the first call of a method is built."""

    def __init__(self, call: Call[Any]) -> None:
        self.call = call


def first_call(plan: Any) -> Any:
    """Raises Sent with a plan's first call; the value of a plan that sends none."""
    if isinstance(plan, Call):
        raise Sent(plan)
    try:
        step = next(plan)
    except StopIteration as done:
        return done.value
    raise Sent(step[0])


class Recorder:
    """An executor that records the call it is given instead of sending it."""

    client: Any = None

    def send_first(self, prefix: str, call: Call[Any]) -> None:
        pass  # what a client sends before its first call: not what is compared

    def execute(self, call: Call[Any], since: int | None = None) -> Any:
        raise Sent(call)

    def execute_all(self, calls: list[Call[Any]], since: int | None = None) -> Any:
        raise Sent(calls[0])

    def run(self, plan: Any) -> Any:
        return first_call(plan)

    def close(self) -> None:
        pass


class AsyncRecorder:
    """:class:`Recorder` for the asyncio clients."""

    client: Any = None

    def send_first(self, prefix: str, call: Call[Any]) -> None:
        pass

    async def execute(self, call: Call[Any], since: int | None = None) -> Any:
        raise Sent(call)

    async def execute_all(self, calls: list[Call[Any]], since: int | None = None) -> Any:
        raise Sent(calls[0])

    async def run(self, plan: Any) -> Any:
        return first_call(plan)

    async def close(self) -> None:
        pass


def _leased() -> LeasedTask:
    return LeasedTask("t1", "alice", Priority.HIGH, "n", {"a": 1}, 0, 1.0, "5", 30.0, 3, 0, 0, None)


def _job() -> LeasedJob:
    return LeasedJob("j1", "resize", [1], -3, 0, 30.0, 2, "9", 1.0)


NOW = datetime(2026, 11, 23, tzinfo=timezone.utc)
WORKER = WorkerInfo("w1", "host", 7, ("add", "resize"), 4, 1, 1.7e9)
REPORT = WorkerReport(worker_id="w1", processors=2, queues={1: QueueReport(batch_size=3)})
CONSTRAINT = Constraint(match=[Matcher(field="name", op="equals", value="a")], rate=5)

# (method, positional arguments, keyword arguments) for each client with an executor.
CASES: dict[str, list[tuple[str, tuple[Any, ...], dict[str, Any]]]] = {
    "queue": [
        ("push", (Task(user_id="alice", task_id="t1", payload=[1]),), {"replicas": 1}),
        ("push_many", ([Task(user_id="a", task_id="x"), Task(user_id="b", task_id="y")],), {}),
        ("pop", (4, ["alice"], ["bob"], "w1", 30.0), {}),
        ("finish", (_leased(), {"r": 1}), {}),
        ("finish_many", ([_leased()], [2]), {}),
        ("release", ([_leased()],), {}),
        ("fail", (_leased(), "boom"), {"retry": False}),
        ("extend", (_leased(), 12.5), {}),
        ("report", (_leased(), 50.0, "half"), {"lines": ["a line"]}),
        ("cancel", ("t1",), {}),
        ("retry", ("t1",), {}),
        ("xcom_push", ("t1", "k", {"v": 1}, 60.0), {}),
        ("xcom_pull", ("t1", "k", 7), {}),
        ("tasks", ("failed", "alice", "n", 5, 20), {}),
        ("retry_failed", ("alice",), {}),
        ("bulk", ("retry", Selector(user_id="alice"), "0.5.9"), {"dry_run": True, "batch": 20}),
        ("get", ("t1",), {}),
        ("get_record", ("t1",), {}),
        ("result", ("t1", 5.0), {}),
        ("stats", (), {}),
        ("stats", (0,), {}),
        ("busiest_tenants", (20, 10), {}),
        ("tenant_stats", ("alice",), {}),
        ("reap", (50,), {}),
        ("maintain", (5.0,), {}),
        ("register_worker", (WORKER, 10.0), {}),
        ("upkeep", (WORKER, 10.0), {"longest_wait": 5.0, "rewrite": False, "names": ["render"]}),
        ("unregister_worker", ("w1",), {}),
        ("workers", (), {}),
        ("tenant", ("alice",), {}),
        ("set_tenant", ("alice",), {"weight": 2, "rate": 5, "period": 1.5, "paused": True}),
        ("tenants_with_shares", (0, 10), {}),
        ("limits", ("render",), {}),
        ("set_limits", ("render",), {"concurrency": 2, "rate": 5, "period": 1.5}),
        ("names_with_limits", (0, 10), {}),
        ("fairness", (3, 7), {}),
        ("namespace_settings", (), {}),
        ("hand_over", ([_leased()], 0.5, 30.0), {}),
        ("next_due", (), {}),
        ("backlog", (7,), {}),
        ("promote", (50,), {}),
    ],
    "jobs": [
        ("push", (Job(name="resize", argument={"w": 1}, priority=-2),), {}),
        ("push_many", ([Job(name="a"), Job(name="b", keep_result=True)],), {}),
        ("pop", ("w1", 3, ["resize"]), {}),
        ("complete", (_job(), Success(finished_at=NOW, result=[1])), {}),
        ("release", (_job(),), {}),
        ("complete_many", ([(_job(), Success(finished_at=NOW, result=[1])), (_job(), None)],), {}),
        ("result", ("j1",), {}),
        ("get", ("j1",), {}),
        ("report", ("j1", "7", 50.0, "half"), {"lines": ["a line"]}),
        ("cancel", ("j1",), {}),
        ("retry", ("j1",), {}),
        ("jobs", ("failed", "resize", 3, 10), {}),
        ("set_constraint", ("c1", CONSTRAINT), {}),
        ("delete_constraint", ("c1",), {}),
        ("constraints", (), {}),
    ],
    "scheduler": [
        ("add_schedule", (), {"interval": 60, "task": {"name": "n", "user_id": "u"}}),
        ("update_schedule", ("s1",), {"interval": 30}),
        ("remove_schedule", ("s1",), {}),
        ("pause_schedule", ("s1",), {}),
        ("resume_schedule", ("s1",), {}),
        ("get_schedule", ("s1",), {}),
        ("list_schedules", (), {}),
        ("instances", (), {}),
        ("health_check", (), {}),
    ],
    "storage": [
        ("get_task", (3, 10, 5.0), {}),
        ("done_task", ([1, 2],), {}),
        ("retry_task", ([RetryInfo(1, NOW)],), {}),
        ("put_task", (PutTaskRequest(2, b"x", start_time=NOW),), {}),
        ("put_tasks", ([PutTaskRequest(2, b"x"), PutTaskRequest(3, b"y")],), {}),
        ("get_stat", (), {}),
        ("beat", (REPORT, 10.0), {}),
        ("workers", (), {}),
        ("publish_plan", ({"w1": [1, 2]},), {}),
        ("read_plan", (), {}),
    ],
}

CLIENTS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "queue": (
        lambda executor: FairQueue(namespace="twins", executor=executor),
        lambda executor: AsyncFairQueue(namespace="twins", executor=executor),
    ),
    "sharded": (
        lambda executor: ShardedQueue(namespace="twins", shards=3, executor=executor),
        lambda executor: AsyncShardedQueue(namespace="twins", shards=3, executor=executor),
    ),
    "jobs": (
        lambda executor: JobQueue(namespace="twins", executor=executor),
        lambda executor: AsyncJobQueue(namespace="twins", executor=executor),
    ),
    "sharded jobs": (
        lambda executor: JobQueue(namespace="twins", shards=3, executor=executor),
        lambda executor: AsyncJobQueue(namespace="twins", shards=3, executor=executor),
    ),
    "scheduler": (
        lambda executor: TaskScheduler(namespace="twins", executor=executor),
        lambda executor: AsyncTaskScheduler(namespace="twins", executor=executor),
    ),
    "storage": (
        lambda executor: RedisStorage(namespace="twins", executor=executor),
        lambda executor: AsyncRedisStorage(namespace="twins", executor=executor),
    ),
}
# A sharded client takes the single one's cases: its first call (a lookup of the shard
# that holds a task, for the calls by id) is compared all the same. A pop that waits (and
# one after a wait), and a finish and pop in one call, are the single queue's own (none
# can span the shards' slots).
SHARDED = {"sharded": "queue", "sharded jobs": "jobs"}
FINISH_AND_POP = {
    "count": 4, "assigned_users": ["alice"], "steal_targets": ["bob"], "worker_id": "w1",
    "lease_seconds": 30.0, "names": ["n"],
}  # fmt: skip
CALL_CASES = [
    (client, *case) for client in CLIENTS for case in CASES[SHARDED.get(client, client)]
] + [
    ("queue", "pop", (4,), {"wait": 2.5}),
    ("queue", "finish_and_pop", ([_leased()], [2]), FINISH_AND_POP),
    ("queue", "pop_after_wait", (2.5, 4), {"worker_id": "w1", "names": ["n"]}),
    (
        "queue",
        "idle_pop",
        (2.5, 4),
        {
            "worker_id": "w1",
            "ttl": 60.0,
            "longest_wait": 30.0,
            "round_interval": 2.0,
            "names": ["n"],
        },
    ),
]


def _first_call(run: Callable[[], Any]) -> Call[Any]:
    with pytest.raises(Sent) as sent:
        run()
    return sent.value.call


async def _first_async_call(run: Callable[[], Any]) -> Call[Any]:
    with pytest.raises(Sent) as sent:
        await run()
    return sent.value.call


@pytest.fixture(autouse=True)
def fixed_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """New ids are random: both twins get the same ones here."""
    monkeypatch.setattr("fairque.jobs.ops.new_ids", lambda n: [f"id{i}" for i in range(n)])
    monkeypatch.setattr("fairque.queue.calls.push.new_ids", lambda n: [f"id{i}" for i in range(n)])


@pytest.mark.parametrize(("client", "method", "args", "kwargs"), CALL_CASES)
async def test_twins_build_the_same_call(
    client: str, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    make_blocking, make_async = CLIENTS[client]
    blocking = make_blocking(Recorder())
    asyncio = make_async(AsyncRecorder())
    sent = _first_call(lambda: getattr(blocking, method)(*args, **kwargs))
    awaited = await _first_async_call(lambda: getattr(asyncio, method)(*args, **kwargs))
    assert (sent.script.name, tuple(sent.keys)) == (awaited.script.name, tuple(awaited.keys))
    assert sent.args == awaited.args
    assert (sent.wait, sent.replicas) == (awaited.wait, awaited.replicas)


# Methods that build no call of their own: lifecycle, the raw call, local lookups, the
# end of waits (a command of the executor's, on the connections it holds).
NO_CALL = {"close", "open", "execute", "run", "stop", "shutdown", "shard_for", "stop_waiting"}


def test_every_public_method_that_sends_a_call_is_compared() -> None:
    covered = {(client, method) for client, method, _args, _kwargs in CALL_CASES}
    for client, (make_blocking, _make_async) in CLIENTS.items():
        for name in _public(type(make_blocking(Recorder()))):
            if not name.startswith("_") and name not in NO_CALL:
                assert (client, name) in covered, f"{client}.{name} has no parity case"
