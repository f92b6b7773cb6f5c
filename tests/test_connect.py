"""The asyncio client's connections pack commands with hiredis (fairque.engine.connect),
byte for byte as redis-py packs them, on every kind of single-server URL."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.connection import Connection
from redis.exceptions import DataError

from fairque import AsyncFairQueue, Task
from fairque.engine.connect import HiredisPacking, async_client
from fairque.servers.embedded import LocalServer

COMMANDS: list[tuple[Any, ...]] = [
    ("FCALL", "fq_0123", 2, "fq:{ns}:ring", "fq:{ns}:ready", "fq:{ns}:", 1, b"\x91\x93\xa1a"),
    ("CLIENT ID",),  # two words in one argument: split, as redis-py does
    (b"CLIENT UNBLOCK", 7),
    ("BLPOP", "fq:{ns}:wakeups", "0.250"),
    ("SET", "k", 1.5),
    ("SET", "k", "ünïcödé"),
    ("SET", "k", bytearray(b"raw")),
    ("SET", "k", memoryview(b"view")),
    ("SET", "k", b""),
]


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0", "rediss://127.0.0.1:1/0",
                                 "unix:///tmp/fairque-none.sock"])  # fmt: skip
async def test_every_single_server_url_packs_with_hiredis(url: str) -> None:
    client = async_client(url)
    assert isinstance(client, aioredis.Redis)
    connection_class = client.connection_pool.connection_class
    assert issubclass(connection_class, HiredisPacking)
    # Still the class redis-py picked for the scheme: TLS and Unix sockets keep working.
    scheme = url.partition(":")[0]
    picked = {"redis": aioredis.Connection, "rediss": aioredis.SSLConnection,
              "unix": aioredis.UnixDomainSocketConnection}[scheme]  # fmt: skip
    assert issubclass(connection_class, picked)
    await client.aclose()


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: repr(c[0]))
def test_packs_as_redis_py_does(command: tuple[Any, ...]) -> None:
    ours = b"".join(HiredisPacking().pack_command(*command))
    theirs = b"".join(Connection().pack_command(*command))
    assert ours == theirs


def test_an_argument_redis_cannot_take_is_a_data_error() -> None:
    with pytest.raises(DataError):
        HiredisPacking().pack_command("SET", "k", {"a": 1})


async def test_a_queue_works_through_it(server: LocalServer, namespace: str) -> None:
    queue = AsyncFairQueue(server.url, namespace)
    task_id = await queue.push(Task(user_id="u", payload={"text": "ünïcödé"}))
    [leased] = await queue.pop(wait=1.0)  # a pipeline of CLIENT ID, BLPOP and FCALL
    assert leased.task_id == task_id
    assert leased.payload == {"text": "ünïcödé"}
    await queue.close()
