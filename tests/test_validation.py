"""Bad input gets an error naming what is wrong, and writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import msgspec
import pytest
import redis

from fairque import (
    DuplicateTask,
    FairQueue,
    FairQueueError,
    InvalidInput,
    LeasedTask,
    Priority,
    QueueSettings,
    Task,
    TaskState,
)
from fairque.errors import from_script_error
from fairque.queue.calls import leases, push
from tests.conftest import Server, namespace_keys

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"priority": 0}, "priority"),
        ({"priority": 7}, "priority"),
        ({"priority": "high"}, "priority"),
        ({"user_id": ""}, "user_id"),
        ({"user_id": "a\nb"}, "user_id"),
        ({"user_id": "x" * 257}, "user_id"),
        ({"task_id": ""}, "task_id"),
        ({"name": "bad\x00name"}, "name"),
        ({"delay": -1}, "delay"),
        ({"delay": timedelta(seconds=-0.5)}, "delay"),
        ({"execute_after": datetime(2030, 1, 1)}, "execute_after"),
        ({"max_retries": -1}, "max_retries"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": 10 * 24 * 3600}, "timeout"),
        ({"unknown": 1}, "unknown"),
        # Numbers the scripts could not store exactly, which would then fail every read.
        ({"max_retries": 2**62}, "max_retries"),
        ({"max_retries": 2**70}, "max_retries"),
        ({"delay": float("inf")}, "delay"),
        ({"delay": float("nan")}, "delay"),
        ({"delay": 1e300}, "delay"),
        ({"delay": timedelta(days=99_999)}, "delay"),
        ({"execute_after": datetime(5000, 1, 1, tzinfo=timezone.utc)}, "execute_after"),
        ({"execute_after": datetime(1969, 12, 31, tzinfo=timezone.utc)}, "execute_after"),
        ({"user_id": "lone \ud800 surrogate"}, "user_id"),
        ({"name": "\udcff"}, "name"),
    ],
)
def test_task_fields_are_validated(fields: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        Task(**{"user_id": "u", **fields})
    assert raised.value.field == field
    assert field in str(raised.value)


def test_execute_after_and_delay_are_exclusive() -> None:
    with pytest.raises(InvalidInput, match="not both"):
        Task(user_id="u", delay=1, execute_after=datetime.now(timezone.utc))


def test_valid_tasks_are_accepted() -> None:
    task = Task(user_id="ユーザー:1", priority=6, delay=0, payload=None)
    assert task.priority is Priority.CRITICAL


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (complex(1, 2), "cannot be serialised"),
        (object(), "cannot be serialised"),
        (2**70, "cannot be serialised"),
        ("x" * 2000, "over the 1024 limit"),
        ("lone \ud800", "cannot be serialised"),
        (pytest.param("nested", "nested too deeply", id="5000-levels")),
    ],
)
def test_bad_payloads_write_nothing(
    make_queue: Callable[..., FairQueue], namespace: str, payload: Any, message: str
) -> None:
    queue = make_queue(QueueSettings(max_payload_bytes=1024))
    if payload == "nested":
        payload = []
        for _ in range(5000):
            payload = [payload]
    queue.push(Task(user_id="u", payload="first"))
    before = namespace_keys(queue.redis, namespace)
    good = Task(user_id="u", payload="fine")
    with pytest.raises(InvalidInput, match=message) as raised:
        queue.push_many([good, Task(user_id="u", payload=payload)])
    assert raised.value.field == "payload"
    assert namespace_keys(queue.redis, namespace) == before


def test_a_duplicate_id_refuses_the_whole_batch(queue: FairQueue, namespace: str) -> None:
    queue.push(Task(user_id="u", task_id="taken", payload=1))
    before = namespace_keys(queue.redis, namespace)
    batch = [Task(user_id="u", task_id=f"new{i}") for i in range(3)] + [
        Task(user_id="v", task_id="taken")
    ]
    with pytest.raises(DuplicateTask, match="taken"):
        queue.push_many(batch)
    assert namespace_keys(queue.redis, namespace) == before
    with pytest.raises(InvalidInput, match="twice"):
        queue.push_many([Task(user_id="u", task_id="same"), Task(user_id="u", task_id="same")])
    assert namespace_keys(queue.redis, namespace) == before


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda q: q.push_many([]), "tasks"),
        (lambda q: q.push_many(["not a task"]), "tasks"),
        (lambda q: q.push_many([Task(user_id="u")] * 10_001), "tasks"),
        (lambda q: q.pop(count=0), "count"),
        (lambda q: q.pop(count=1001), "count"),
        (lambda q: q.pop(count=True), "count"),
        (lambda q: q.pop(assigned_users="alice"), "assigned_users"),
        (lambda q: q.pop(assigned_users=[""]), "assigned_users"),
        (lambda q: q.pop(steal_targets=["u"] * 1001), "steal_targets"),
        (lambda q: q.pop(worker_id=""), "worker_id"),
        (lambda q: q.pop(lease_seconds=0), "lease_seconds"),
    ],
)
def test_bad_calls_name_the_argument(
    queue: FairQueue, namespace: str, call: Callable[[FairQueue], object], field: str
) -> None:
    queue.push(Task(user_id="u", payload="x"))
    before = namespace_keys(queue.redis, namespace)
    with pytest.raises(InvalidInput) as raised:
        call(queue)
    assert raised.value.field == field
    assert namespace_keys(queue.redis, namespace) == before


def test_bad_lease_calls(queue: FairQueue) -> None:
    queue.push(Task(user_id="u", payload="x"))
    (leased,) = queue.pop()
    with pytest.raises(InvalidInput, match="seconds"):
        queue.extend(leased, -1)
    with pytest.raises(InvalidInput, match="one result per task"):
        queue.finish_many([leased], [1, 2])
    with pytest.raises(InvalidInput, match="result"):
        queue.finish(leased, result=object())


@pytest.mark.parametrize("namespace", ["", "a{b}", "a b", "x" * 65])
def test_bad_namespace(namespace: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        FairQueue("redis://127.0.0.1:1", namespace)
    assert raised.value.field == "namespace"


@pytest.mark.parametrize(
    "fields",
    [
        {"retry_backoff_max": 0},
        {"finished_ttl": float("inf")},
        {"failed_ttl": 1e20},
        {"retry_backoff_base": float("nan")},
        {"max_payload_bytes": 2**40},
    ],
)
def test_settings_are_validated(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(fields))):
        QueueSettings(**fields)


@pytest.mark.parametrize("field", ["payload", "headers"])
def test_a_record_that_cannot_be_read_fails_alone(queue: FairQueue, field: str) -> None:
    """A task written by something else (here: a raw write) never reaches a worker, never
    strands the rest of its batch, and is failed with an error naming the field."""
    broken = queue.push(Task(user_id="a", task_id="broken", max_retries=5))
    fine = queue.push(Task(user_id="b", payload={"n": 1}))
    queue.redis.hset(queue.namespace.key(f"task:{broken}"), field, b"\xc1")  # not MessagePack
    leased = queue.pop(count=2)
    assert [task.task_id for task in leased] == [fine]
    with pytest.raises(InvalidInput, match="broken: stored record unreadable"):
        queue.get(broken)
    state, error = queue.redis.hmget(queue.namespace.key(f"task:{broken}"), "state", "last_error")
    assert state == b"failed"  # for good, whatever its max_retries
    assert isinstance(error, bytes)
    assert f"stored record unreadable: {field}".encode() in error
    queue.finish(leased[0])
    assert queue.stats().states[TaskState.FAILED] == 1


def test_the_script_refuses_what_would_corrupt_state(queue: FairQueue, namespace: str) -> None:
    call = push.push(queue.namespace, [Task(user_id="u"), Task(user_id="v")])
    head, (count, rows, *payloads) = call.args[:1], call.args[1:]
    assert isinstance(rows, bytes)
    values = msgspec.msgpack.decode(rows)  # the rows one after the other, 10 values each
    good, second = values[:10], values[10:]
    assert len(second) == 10
    refused = {
        "INVALID priority 9": [*good, *second[:2], 9, *second[3:]],
        "INVALID task_id or user_id of task 2": [*good, second[0], "", *second[2:]],
        "INVALID headers of task 2": [*good, *second[:8], 7, *second[9:]],
        "DUPLICATE": [*good, *good],
        "INVALID tasks do not match": good,
        "INVALID tasks do not match their count": [*good, *second[:9], 1],  # its dependency?
        "INVALID depends_on of task 2": [*good, *second[:9], 1, 7],
    }
    before = namespace_keys(queue.redis, namespace)
    for message, tampered in refused.items():
        args = (*head, count, msgspec.msgpack.encode(tampered), *payloads)
        with pytest.raises(redis.ResponseError, match=message):
            queue.redis.eval(call.script.source, len(call.keys), *call.keys, *args)
    assert namespace_keys(queue.redis, namespace) == before


def test_script_errors_map_to_fairque_errors() -> None:
    assert isinstance(from_script_error("DUPLICATE x"), DuplicateTask)
    invalid = from_script_error("INVALID priority 9")
    assert isinstance(invalid, InvalidInput)
    assert invalid.field == "priority"
    other = from_script_error("ERR something else")
    assert type(other) is FairQueueError
    assert "something else" in str(other)


def test_a_leased_task_from_another_queue_is_refused(queue: FairQueue) -> None:
    ghost = LeasedTask("ghost", "u", Priority.NORMAL, None, None, 0, 0.0, "1", 1.0, 3, 0.0, 0.0,
                       None)  # fmt: skip
    assert queue.finish_many([ghost]) == ["ghost"]


def test_finish_refuses_rows_that_do_not_match_their_count(queue: FairQueue) -> None:
    queue.push(Task(user_id="u", payload="x"))
    (leased,) = queue.pop()
    call = leases.finish(queue.namespace, [leased], [None])
    head, (_, rows) = call.args[:1], call.args[1:]
    with pytest.raises(redis.ResponseError, match="INVALID tasks do not match"):
        queue.redis.eval(call.script.source, len(call.keys), *call.keys, *head, 2, rows)
    queue.finish(leased)


@pytest.mark.parametrize(
    "call",
    [
        lambda q: q.set_tenant(123, weight=2),
        lambda q: q.tenant(4.5),
        lambda q: q.tenant_stats(b"x"),
        lambda q: q.retry_failed(7),
        lambda q: q.tasks("queued", user_id=5),
    ],
)
def test_a_tenant_that_is_not_a_string_is_named(
    queue: FairQueue, call: Callable[[FairQueue], object]
) -> None:
    with pytest.raises(InvalidInput) as raised:
        call(queue)
    assert raised.value.field == "user_id"
    assert "must be a string" in str(raised.value)


def test_shares_are_as_strict_in_python_as_over_http(queue: FairQueue) -> None:
    with pytest.raises(InvalidInput) as raised:
        queue.set_tenant("alice", weight="3")  # type: ignore[arg-type]
    assert raised.value.field == "weight"
    assert queue.set_tenant("alice", rate=5, period=60).period == 60.0  # an int is a float


def test_a_queue_takes_another_clients_namespace(server: Server, queue: FairQueue) -> None:
    queue.push(Task(user_id="alice", task_id="shared"))
    with FairQueue(server.url, namespace=queue.namespace) as same:
        assert same.namespace.name == queue.namespace.name
        assert same.get("shared") is not None
