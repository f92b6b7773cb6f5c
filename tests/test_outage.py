"""What counts as an outage: redis-py's leaks of a closed connection become connection
errors; any other error stays what it is. And a call whose function the server lost
again right after it was loaded (a failover) loads it again."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis
import uvloop
from redis.asyncio.connection import Connection
from redis.client import Pipeline
from redis.exceptions import ConnectionError as RedisConnectionError

from fairque import AsyncFairQueue, FairQueue, Task
from fairque.engine.outage import OUTAGE, OutageLog, connection_errors
from fairque.engine.pipelined import LIBRARY_LOADS
from fairque.errors import FairQueueError, NotReplicated, ServerUnavailable
from fairque.servers.embedded import LocalServer
from tests.conftest import wait_for


@pytest.fixture(scope="module")
def valkey() -> Iterator[LocalServer]:
    """A server of this module's own: its tests flush the server's functions."""
    with LocalServer() as started:
        yield started


async def test_a_write_on_a_closed_connection_is_a_connection_error(server: LocalServer) -> None:
    connection = Connection(host="127.0.0.1", port=server.port)
    await connection.connect()  # type: ignore[no-untyped-call]
    await connection.disconnect()  # what another task sharing the client did in CI
    # The line a cluster failover reached (redis-py 8.1): a write on the closed stream.
    with pytest.raises(AttributeError):
        await connection._send_packed_command([b"PING\r\n"])
    expected = pytest.raises(RedisConnectionError, match="connection closed under a command")
    with expected as caught, connection_errors():
        await connection._send_packed_command([b"PING\r\n"])
    assert isinstance(caught.value, OUTAGE)
    assert isinstance(caught.value.__cause__, AttributeError)


def test_a_write_on_a_closed_uvloop_transport_is_a_connection_error(server: LocalServer) -> None:
    # What ended a worker stopped just after a failover with exit status 2 (issue 47).
    async def write_after_close() -> None:
        _, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.transport.close()
        await writer.wait_closed()  # the handle is closed: a write is refused now
        with pytest.raises(RuntimeError, match="closed"):
            writer.write(b"PING\r\n")
        with pytest.raises(RedisConnectionError, match="connection closed"), connection_errors():
            writer.write(b"PING\r\n")

    uvloop.run(write_after_close())


def test_an_outage_is_said_once_reminded_at_most_every_30_s_and_over_once_calls_settle(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [1000.0]
    outage = OutageLog(logging.getLogger("fairque.test"), "S", "waiting", clock=lambda: now[0])
    with caplog.at_level(logging.INFO, "fairque.test"):
        for _ in range(130):  # a minute of failures, 0.5 s apart, from several loops
            outage.failed(RedisConnectionError("refused"))
            now[0] += 0.5
        outage.answered()  # 0.5 s after the last failure: another server may still fail
        now[0] += 1.5
        outage.answered()  # 2 s: over
        outage.answered()
    assert [record.getMessage() for record in caplog.records] == [
        "the server S is unreachable (ConnectionError: refused); waiting",
        "the server S is still unreachable after 30 s (refused); waiting",
        "the server S is still unreachable after 60 s (refused); waiting",
        "the server S answers again (away 66.5 s)",
    ]
    assert not outage.down


def test_errors_of_other_code_are_left_alone() -> None:
    with pytest.raises(AttributeError, match="no_such_name"), connection_errors():
        _ = object().no_such_name  # type: ignore[attr-defined]
    with pytest.raises(TypeError), connection_errors():
        len(5)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError), connection_errors():
        raise RuntimeError("a program's own")


# A failover's full sync replaces a demoted master's functions with its new master's: a
# call that loaded its library just before finds no function again. These clients make
# that happen right after a library load, on a real server.


class Replacements:
    """How many of a client's next library loads its server's functions are lost after."""

    def __init__(self, count: int = 1) -> None:
        self.left = count

    def after(self, command: Any) -> bool:
        """True if the functions are to be lost after ``command`` (a load, while any left)."""
        if command == "FUNCTION LOAD" and self.left > 0:
            self.left -= 1
            return True
        return False


class FunctionsReplacedAfterLoad(redis.Redis):
    """A client whose server loses its functions right after some of its library loads."""

    replacements: Replacements

    def execute_command(self, *args: Any, **options: Any) -> Any:
        reply = super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        if self.replacements.after(args[0]):
            super().execute_command("FUNCTION FLUSH")  # type: ignore[no-untyped-call]
        return reply

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Pipeline:
        replacements = self.replacements

        class Replacing(Pipeline):
            def execute_command(self, *args: Any, **kwargs: Any) -> Any:
                queued = super().execute_command(*args, **kwargs)  # type: ignore[no-untyped-call]
                if replacements.after(args[0]):
                    super().execute_command("FUNCTION FLUSH")  # type: ignore[no-untyped-call]
                return queued

        return Replacing(self.connection_pool, self.response_callbacks, transaction, shard_hint)


class AsyncFunctionsReplacedAfterLoad(aioredis.Redis):
    """The asyncio twin of :class:`FunctionsReplacedAfterLoad`, for single calls."""

    replacements: Replacements

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        reply = await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        if self.replacements.after(args[0]):
            await super().execute_command("FUNCTION FLUSH")  # type: ignore[no-untyped-call]
        return reply


def replacing_client(
    server: LocalServer, replacements: Replacements | None = None
) -> FunctionsReplacedAfterLoad:
    """A client of ``server``, whose functions are flushed: its next call loads a library."""
    client = FunctionsReplacedAfterLoad(host="127.0.0.1", port=server.port)
    client.replacements = replacements or Replacements()
    client.function_flush()
    return client


def test_a_call_loads_again_a_function_lost_right_after_its_load(
    valkey: LocalServer, namespace: str
) -> None:
    client = replacing_client(valkey)
    with FairQueue(namespace=namespace, client=client) as queue:
        task_id = queue.push(Task(user_id="u"))
        assert client.replacements.left == 0  # its first load was undone, and it loaded again
        assert queue.get(task_id) is not None


def test_a_replicated_push_loads_again_a_function_lost_right_after_its_load(
    valkey: LocalServer, namespace: str
) -> None:
    client = replacing_client(valkey)
    with FairQueue(namespace=namespace, client=client) as queue:
        # A lone server has no replica to confirm it, but the write stands: the call ran.
        with pytest.raises(NotReplicated):
            queue.push(Task(user_id="u", task_id="kept"), replicas=1, replica_timeout=0.01)
        assert client.replacements.left == 0
        assert queue.get("kept") is not None


async def test_an_async_call_loads_again_a_function_lost_right_after_its_load(
    valkey: LocalServer, namespace: str
) -> None:
    client = AsyncFunctionsReplacedAfterLoad(host="127.0.0.1", port=valkey.port)
    client.replacements = Replacements()
    await client.function_flush()
    async with AsyncFairQueue(namespace=namespace, client=client) as queue:
        task_id = await queue.push(Task(user_id="u"))
        assert client.replacements.left == 0
        assert await queue.get(task_id) is not None


def test_a_server_that_keeps_losing_the_function_fails_the_call(
    valkey: LocalServer, namespace: str
) -> None:
    client = replacing_client(valkey, Replacements(100))
    with FairQueue(namespace=namespace, client=client) as queue:
        with pytest.raises(FairQueueError, match="Function not found"):
            queue.push(Task(user_id="u"))
        assert client.replacements.left == 100 - LIBRARY_LOADS  # a bounded number of loads


def test_a_demoted_node_without_the_function_is_a_failover(namespace: str) -> None:
    """A node that became a replica has its new master's functions, maybe none: its
    refusal to load the library (READONLY) is a failover, for plain and replicated
    writes alike, not a script's error."""
    master_options = ["--repl-diskless-sync-delay", "0"]
    with LocalServer() as demoted, LocalServer(options=master_options) as master:
        admin = redis.Redis(host="127.0.0.1", port=demoted.port)
        with FairQueue(demoted.url, namespace) as queue:
            queue.push(Task(user_id="u"))  # the client's settings are written: no call waits
            admin.replicaof("127.0.0.1", master.port)
            wait_for(lambda: admin.info("replication")["master_link_status"] == "up")
            assert admin.function_list() == []  # its master's: none
            with pytest.raises(ServerUnavailable, match="is failing over"):
                queue.push(Task(user_id="u"), replicas=1, replica_timeout=0.01)
            with pytest.raises(ServerUnavailable, match="is failing over"):
                queue.push(Task(user_id="u"))
        admin.close()
