"""A task name's defaults (timeout, max_retries, priority, lease) held by the server, beside
its limits: set by ``set_limits``, by ``@task`` through the workers that serve the name,
and taken by every push that leaves them out, whoever pushed; and the field tables that
make a new setting cost no data format change."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from fairque import AsyncFairQueue, FairQueue, Priority, Task
from fairque.engine.calls import pack
from fairque.engine.fields import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, PUSH_ROW, Row
from fairque.engine.scripts import load
from fairque.errors import InvalidInput
from fairque.queue.calls import push
from fairque.servers.embedded import LocalServer
from fairque.worker import Registry, Worker, WorkerConfig, task
from tests.conftest import until

pytestmark = pytest.mark.cluster


def test_a_push_that_leaves_a_field_out_takes_its_names_default(queue: FairQueue) -> None:
    limits = queue.set_limits("render", timeout=60.0, max_retries=7, priority=5, lease=20.0)
    assert (limits.timeout, limits.max_retries, limits.priority, limits.lease) == (60, 7, 5, 20)
    plain = queue.get(queue.push(Task(user_id="u", name="render")))
    own = queue.get(queue.push(Task(user_id="u", name="render", timeout=9, max_retries=0,
                                    priority=Priority.LOW)))  # fmt: skip
    other = queue.get(queue.push(Task(user_id="u", name="mail")))
    assert plain is not None
    assert own is not None
    assert other is not None
    assert (plain.timeout, plain.max_retries, plain.priority) == (60.0, 7, Priority.HIGHEST)
    assert (own.timeout, own.max_retries, own.priority) == (9.0, 0, Priority.LOW)
    assert (other.timeout, other.max_retries, other.priority) == (
        DEFAULT_TIMEOUT, DEFAULT_MAX_RETRIES, Priority.NORMAL,
    )  # fmt: skip
    # Set back to "not set", the name's tasks take the global defaults again.
    queue.set_limits("render", timeout=0, max_retries=-1, priority=0, lease=0)
    again = queue.get(queue.push(Task(user_id="u", name="render")))
    assert again is not None
    assert (again.timeout, again.priority) == (DEFAULT_TIMEOUT, 3)


def test_a_pop_that_names_no_lease_takes_the_names(queue: FairQueue) -> None:
    queue.set_limits("render", lease=30.0)
    queue.push_many([Task(user_id="u", name="render", timeout=500) for _ in range(2)])
    before = time.time()
    (named,) = queue.pop(names=["render"])
    (asked,) = queue.pop(names=["render"], lease_seconds=200.0)
    assert before + 25 < named.lease_deadline < time.time() + 35  # not the 500 s timeout
    assert asked.lease_deadline > before + 150


def test_a_stored_row_shorter_than_its_table_reads_the_rest_as_defaults(queue: FairQueue) -> None:
    # A name's defaults as a release that knew only the timeout would have stored them:
    # a field added at the end of a table needs no data format change.
    queue.redis.hset(queue.namespace.key("names:defaults"), "render", "60000000")
    limits = queue.limits("render")
    assert (limits.timeout, limits.max_retries, limits.priority, limits.lease) == (60, -1, 0, 0)
    info = queue.get(queue.push(Task(user_id="u", name="render")))
    assert info is not None
    assert (info.timeout, info.max_retries) == (60.0, DEFAULT_MAX_RETRIES)
    assert queue.set_limits("render", priority=2).timeout == 60  # kept, the row grows


def test_limits_and_defaults_are_stored_apart(queue: FairQueue) -> None:
    """Releases before the defaults read every name row of the shares' hash: a name with
    defaults only adds none there, and one with both keeps its limits' row as it was."""
    shares, defaults = queue.namespace.key("shares"), queue.namespace.key("names:defaults")
    queue.set_limits("render", timeout=60.0)
    assert queue.redis.hlen(shares) == 0
    queue.set_limits("render", concurrency=2)
    assert queue.redis.hget(shares, "\x01render") == b"1 2 0 0 0"
    assert queue.redis.hget(defaults, "render") == b"60000000 -1 0 0"
    queue.set_limits("render", timeout=0)  # back to the defaults: no row left
    assert queue.redis.hlen(defaults) == 0


@pytest.mark.parametrize(
    ("field", "value"), [("priority", 7), ("max_retries", -2), ("timeout", -1.0), ("lease", 1e9)]
)
def test_a_default_out_of_bounds_is_refused(queue: FairQueue, field: str, value: Any) -> None:
    with pytest.raises(InvalidInput) as raised:
        queue.set_limits("render", **{field: value})
    assert raised.value.field == field
    assert queue.limits("render").timeout == 0  # nothing changed


def test_a_push_row_that_leaves_fields_out_takes_the_defaults(queue: FairQueue) -> None:
    """What a pusher in another language that sends the script's row gets: a field sent as
    '' takes its name's default, else the global one."""
    queue.set_limits("render", priority=6)
    call = push.push_one(queue.namespace, Task(user_id="u", name="render"))
    for task_id, name in (("raw-render", "render"), ("raw-mail", "mail")):
        row = PUSH_ROW.pack(
            task_id=task_id, tenant="u", priority="", name=name, max_retries="", timeout="",
            keep_result=0, start="", headers="", dependencies=0,
        )  # fmt: skip
        head, payload = call.args[0], call.args[-1]
        queue.redis.eval(
            call.script.source, len(call.keys), *call.keys, head, 1, pack(row), payload
        )
    render, mail = queue.get("raw-render"), queue.get("raw-mail")
    assert render is not None
    assert mail is not None
    assert (render.priority, render.max_retries, render.timeout) == (Priority.CRITICAL, 3, 300.0)
    assert (mail.priority, mail.max_retries, mail.timeout) == (Priority.NORMAL, 3, 300.0)


async def test_a_worker_sets_its_functions_declared_defaults(
    server: LocalServer, namespace: str
) -> None:
    functions = Registry()

    @task(into=functions, name="render", timeout=45.0, max_retries=1)
    def render() -> None:
        return None

    @task(into=functions, name="plain")
    def plain() -> None:
        return None

    async with AsyncFairQueue(server.url, namespace) as queue:
        worker = Worker(WorkerConfig(redis_url=server.url, namespace=namespace), functions)
        running = asyncio.create_task(worker.run_async())
        try:
            await until(lambda: _has_timeout(queue, "render"))
        finally:
            worker.stop()
            await running
        assert (await queue.limits("plain")).timeout == 0  # declared nothing: untouched
        info = await queue.get(await queue.push(Task(user_id="u", name="render")))
        assert info is not None
        assert (info.timeout, info.max_retries) == (45.0, 1)


async def _has_timeout(queue: AsyncFairQueue, name: str) -> bool:
    return (await queue.limits(name)).timeout == 45.0


def test_task_refuses_a_bad_default_when_it_is_declared() -> None:
    with pytest.raises(InvalidInput) as raised:
        task(into=Registry(), name="x", priority=9)(lambda: None)
    assert raised.value.field == "priority"


def test_a_row_packs_in_its_order_and_reads_missing_fields_as_defaults() -> None:
    row = Row("SOME_ROW", ("a", "b", "c"), (1, 2, 3))
    assert row.pack(c=30, a=10, b=20) == (10, 20, 30)
    with pytest.raises(KeyError):
        row.pack(a=1, b=2)
    assert row.unpack([7]) == {"a": 7, "b": 2, "c": 3}
    assert row.lua("b") == "1"
    assert row.lua("WIDTH") == "3"
    assert row.lua("FIELDS") == "{'a', 'b', 'c'}"
    assert row.lua("DEFAULTS") == "{a = 1, b = 2, c = 3}"
    with pytest.raises(ValueError, match="no field 'd'"):
        row.lua("d")


def test_scripts_carry_the_tables_constants() -> None:
    source = load("queue/push").source
    assert "PUSH_ROW." not in source
    assert "NEW_TASK." not in source
    assert f"at + {PUSH_ROW.offset('dependencies')}" in source
