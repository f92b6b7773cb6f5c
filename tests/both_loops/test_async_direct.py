"""A plain asyncio client's calls go straight to one pipelined connection
(fairque.engine.async_direct) with redis-py's outcomes: replies, error replies, a
connection the server closed with calls in flight or between them, a late reply, a
cancelled call, a server gone, a function it lost, a new event loop; and other clients
keep redis-py's path."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, cast

import hiredis
import pytest
import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import BusyLoadingError, DataError, InvalidResponse, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fairque import AsyncFairQueue, DuplicateTask, ServerUnavailable, Task
from fairque.engine.async_direct import AsyncDirectCalls, PipelinedConnection, async_direct_calls
from fairque.engine.async_executor import AsyncExecutor
from fairque.engine.async_routes import AsyncOneServer
from fairque.engine.connect import async_client
from fairque.engine.routes import AsyncNode
from fairque.queue.calls.push import push_one
from fairque.servers.embedded import LocalServer
from tests.conftest import until

# Functions whose replies take every shape a script's reply can have.
LIBRARY = """#!lua name=async_direct_tests
redis.register_function('echo', function(keys, args) return args end)
redis.register_function('shapes', function(keys, args)
  return {1, 'two', {3, false, {'deep'}}, redis.status_reply('FINE'), -7}
end)
redis.register_function('number', function(keys, args) return 42 end)
redis.register_function('nothing', function(keys, args) return false end)
redis.register_function('status', function(keys, args) return redis.status_reply('OK') end)
redis.register_function('fails', function(keys, args) return redis.error_reply('ERR nope') end)
redis.register_function('missing', function(keys, args) return redis.call('NOSUCH') end)
redis.register_function('loading', function(keys, args)
  return redis.error_reply('LOADING not really')
end)
redis.register_function('loading_first', function(keys, args)
  return {redis.error_reply('LOADING not really'), 1}
end)
redis.register_function('error_inside', function(keys, args)
  return {1, redis.error_reply('ERR inside')}
end)
"""


@pytest.fixture(scope="module")
def valkey() -> Iterator[LocalServer]:
    with LocalServer() as started:
        admin = redis.Redis.from_url(started.url)
        admin.function_load(LIBRARY, replace=True)
        admin.close()
        yield started


@pytest.fixture
async def admin(valkey: LocalServer) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(valkey.url)
    yield client
    await client.client_unpause()  # a test that failed while the server was paused
    await client.aclose()


NO_RETRY = Retry(NoBackoff(), 0)  # a client's policy that gives up at the first error

OpenCalls = Callable[..., AsyncDirectCalls]


def direct(client: Any) -> AsyncDirectCalls:
    calls = async_direct_calls(client)
    assert calls is not None
    return calls


@pytest.fixture
async def open_calls(valkey: LocalServer) -> AsyncIterator[OpenCalls]:
    """Makes the direct calls of a new plain client of the module's server (or of
    ``url``), ``redis.asyncio.Redis.from_url(url, **options)``; closed after the test."""
    made: list[AsyncDirectCalls] = []

    def open_calls(url: str = valkey.url, **options: Any) -> AsyncDirectCalls:
        made.append(direct(aioredis.Redis.from_url(url, **options)))
        return made[-1]

    yield open_calls
    for calls in made:
        await calls.close()
        await calls.client.aclose()


def direct_of(executor: AsyncExecutor) -> AsyncDirectCalls:
    calls = one_server(executor).direct
    assert calls is not None
    return calls


def one_server(executor: AsyncExecutor) -> AsyncNode:
    route = executor.route
    assert isinstance(route, AsyncOneServer)
    return route.the_node


def connection_of(calls: AsyncDirectCalls) -> PipelinedConnection:
    connection = calls.connection
    assert connection is not None
    return connection


async def until_true(condition: Callable[[], bool]) -> None:
    """``until`` for a condition read without a round trip."""

    async def probe() -> bool:
        return condition()

    await until(probe)


async def in_flight(calls: AsyncDirectCalls, count: int) -> None:
    """Returns once ``count`` calls are sent and unanswered on the connection in use."""
    await until_true(
        lambda: calls.connection is not None and len(calls.connection.in_flight) >= count
    )


async def connected_and_paused(
    calls: AsyncDirectCalls, admin: aioredis.Redis
) -> PipelinedConnection:
    """``calls``' connection, once made, with the server holding every call from now on
    (``CLIENT PAUSE WRITE``: a function's call waits, the admin's commands do not)."""
    assert await calls.command("FCALL", "number", 0) == 42
    await admin.client_pause(60_000, all=False)
    return connection_of(calls)


async def held(calls: AsyncDirectCalls, text: Any) -> asyncio.Task[Any]:
    """The task of a call (echoing ``text``) once it is sent and not yet answered."""
    count = len(connection_of(calls).in_flight)
    call = asyncio.create_task(calls.command("FCALL", "echo", 0, text))
    await in_flight(calls, count + 1)
    return call


async def killed(admin: aioredis.Redis, name: str) -> None:
    """Closes, from the server's side, the connections of the client named ``name``."""
    for client in await admin.client_list():
        if client["name"] == name:
            await admin.client_kill_filter(_id=client["id"])


async def test_an_async_queue_from_a_url_sends_directly(
    valkey: LocalServer, namespace: str
) -> None:
    async with AsyncFairQueue(valkey.url, namespace) as queue:
        task_id = await queue.push(Task(user_id="u", payload={"text": "ünïcödé"}))
        assert connection_of(direct_of(queue.executor)).transport is not None
        [leased] = await queue.pop()
        assert (leased.task_id, leased.payload) == (task_id, {"text": "ünïcödé"})


@pytest.mark.parametrize("decode", [False, True])
async def test_replies_are_redis_pys(open_calls: OpenCalls, decode: bool) -> None:
    # No socket_timeout: a reply may take as long as it takes.
    calls = open_calls(decode_responses=decode, socket_timeout=None)
    arguments: list[tuple[Any, ...]] = [
        ("echo", 0, "text", b"bytes", 12, 1.5, "ünïcödé", ""),
        ("shapes", 0),
        ("number", 0),
        ("nothing", 0),
        ("status", 0),
        ("error_inside", 0),
    ]
    for args in arguments:
        ours = await calls.command("FCALL", *args)
        theirs = await calls.client.fcall(*args)
        assert repr(ours) == repr(theirs)  # error objects inside compare by their text
    for args in [("fails", 0), ("missing", 0), ("unknown", 0)]:
        with pytest.raises(ResponseError) as ours_raised:
            await calls.command("FCALL", *args)
        with pytest.raises(ResponseError) as theirs_raised:
            await calls.client.fcall(*args)
        assert type(ours_raised.value) is type(theirs_raised.value)
        assert str(ours_raised.value) == str(theirs_raised.value)


async def test_an_argument_hiredis_cannot_pack_is_redis_pys_data_error(
    open_calls: OpenCalls,
) -> None:
    with pytest.raises(DataError):
        await open_calls().command("FCALL", "echo", 0, True)


async def test_an_error_reply_leaves_the_connection_usable(
    valkey: LocalServer, namespace: str
) -> None:
    async with AsyncFairQueue(valkey.url, namespace) as queue:
        await queue.push(Task(user_id="u", task_id="t1"))
        connection = connection_of(direct_of(queue.executor))
        with pytest.raises(DuplicateTask):
            await queue.push(Task(user_id="u", task_id="t1"))
        assert await queue.push(Task(user_id="u", task_id="t2")) == "t2"
        assert direct_of(queue.executor).connection is connection


@pytest.mark.parametrize("function", ["loading", "loading_first"])
async def test_a_reply_redis_py_takes_as_a_lost_connection_drops_it(
    open_calls: OpenCalls, function: str
) -> None:
    calls = open_calls(retry=NO_RETRY)
    assert await calls.command("FCALL", "number", 0) == 42
    first = connection_of(calls)
    with pytest.raises(BusyLoadingError):
        await calls.client.fcall(function, 0)  # redis-py's path raises it
    with pytest.raises(BusyLoadingError):
        await calls.command("FCALL", function, 0)
    assert first.error is not None
    assert await calls.command("FCALL", "number", 0) == 42
    assert calls.connection is not first


async def test_many_concurrent_calls_each_get_their_own_reply(open_calls: OpenCalls) -> None:
    calls = open_calls()
    replies = await asyncio.gather(*(calls.command("FCALL", "echo", 0, i) for i in range(400)))
    assert replies == [[str(i).encode()] for i in range(400)]


async def test_a_cancelled_call_leaves_the_next_replies_in_step(
    open_calls: OpenCalls, admin: aioredis.Redis
) -> None:
    calls = open_calls()
    await connected_and_paused(calls, admin)
    cancelled = await held(calls, "cancelled")
    cancelled.cancel()
    after = await held(calls, "after")
    await admin.client_unpause()
    assert await after == [b"after"]
    assert await calls.command("FCALL", "echo", 0, "next") == [b"next"]
    assert cancelled.cancelled()


async def test_a_call_cancelled_before_its_connection_is_made_is_not_sent(
    open_calls: OpenCalls,
) -> None:
    calls = open_calls()
    cancelled = asyncio.create_task(calls.command("FCALL", "echo", 0, "never"))
    await asyncio.sleep(0)  # the call waits for the connection
    cancelled.cancel()
    assert await calls.command("FCALL", "echo", 0, "sent") == [b"sent"]
    assert not connection_of(calls).in_flight


async def test_calls_in_flight_when_the_server_closes_the_connection(
    open_calls: OpenCalls, admin: aioredis.Redis, namespace: str
) -> None:
    calls = open_calls(client_name=namespace, retry=NO_RETRY)
    first = await connected_and_paused(calls, admin)
    sent = [await held(calls, i) for i in range(5)]
    sent[0].cancel()
    await killed(admin, namespace)
    outcomes = await asyncio.gather(*sent[1:], return_exceptions=True)
    assert all(isinstance(outcome, RedisConnectionError) for outcome in outcomes)
    assert sent[0].cancelled()
    await admin.client_unpause()
    assert await calls.command("FCALL", "echo", 0, "again") == [b"again"]  # a new connection
    assert calls.connection is not first


async def test_calls_in_flight_are_retried_under_the_clients_policy(
    open_calls: OpenCalls, admin: aioredis.Redis, namespace: str
) -> None:
    calls = open_calls(client_name=namespace, retry=Retry(NoBackoff(), 3))
    first = await connected_and_paused(calls, admin)
    sent = [await held(calls, i) for i in range(5)]
    await killed(admin, namespace)
    await until_true(lambda: first.error is not None)
    await admin.client_unpause()
    assert await asyncio.gather(*sent) == [[str(i).encode()] for i in range(5)]
    assert calls.connection is not first


async def test_a_connection_closed_between_calls_is_replaced(
    valkey: LocalServer, admin: aioredis.Redis, namespace: str
) -> None:
    client = async_client(valkey.url, client_name=namespace, retry=NO_RETRY)
    async with AsyncFairQueue(namespace=namespace, client=client) as queue:
        await queue.push(Task(user_id="u"))
        first = connection_of(direct_of(queue.executor))
        await killed(admin, namespace)
        await until_true(lambda: first.error is not None)  # the loop saw it close
        await queue.push(Task(user_id="u", task_id="after"))  # no retry was needed
        assert direct_of(queue.executor).connection is not first
        assert await queue.get("after") is not None


async def test_a_late_reply_is_a_timeout_and_drops_the_connection(
    open_calls: OpenCalls, admin: aioredis.Redis
) -> None:
    calls = open_calls(retry=NO_RETRY, socket_timeout=0.5)
    first = await connected_and_paused(calls, admin)
    with pytest.raises(RedisTimeoutError):
        await calls.command("FCALL", "echo", 0, "late")
    assert first.error is not None
    await admin.client_unpause()
    assert await calls.command("FCALL", "echo", 0, "in time") == [b"in time"]


async def test_a_reply_is_due_a_timeout_after_its_own_call(
    open_calls: OpenCalls, admin: aioredis.Redis
) -> None:
    """The connection watches the oldest reply only: when an earlier call's time is up,
    a later call still in flight has its own."""
    calls = open_calls(retry=NO_RETRY, socket_timeout=0.5)
    connection = await connected_and_paused(calls, admin)  # the first reply was due in 0.5 s
    earlier = connection.timer
    connection.timeout = 60.0  # the later call's is due in a minute
    later = await held(calls, "later")
    await until_true(lambda: connection.timer is not earlier)  # the earlier time passed
    await admin.client_unpause()
    assert await later == [b"later"]
    assert connection.error is None


async def test_a_connection_with_no_call_in_flight_waits_for_none(open_calls: OpenCalls) -> None:
    calls = open_calls(retry=NO_RETRY, socket_timeout=0.3)
    await calls.command("FCALL", "number", 0)
    connection = connection_of(calls)
    await until_true(lambda: connection.timer is None)  # its reply's time passed
    assert connection.error is None
    assert await calls.command("FCALL", "number", 0) == 42
    assert calls.connection is connection


async def test_a_lost_function_is_loaded_again(valkey: LocalServer, namespace: str) -> None:
    async with AsyncFairQueue(valkey.url, namespace) as queue:
        await queue.push(Task(user_id="u"))
        await queue.redis.function_flush()
        assert await queue.push(Task(user_id="u", task_id="reloaded")) == "reloaded"
        await queue.redis.function_load(LIBRARY)  # this module's, for the other tests


async def test_a_queues_own_calls_take_one_connection(
    valkey: LocalServer, admin: aioredis.Redis, namespace: str
) -> None:
    client = async_client(valkey.url, client_name=namespace)
    async with AsyncFairQueue(namespace=namespace, client=client) as queue:
        await asyncio.gather(*(queue.push(Task(user_id=f"u{i}")) for i in range(50)))
        await asyncio.gather(queue.stats(), queue.pop(count=10), queue.stats())
        names = [c["name"] for c in await admin.client_list()]
        assert names.count(namespace) == 1

    async def gone() -> bool:
        return namespace not in [c["name"] for c in await admin.client_list()]

    await until(gone)  # closed with the queue


async def test_a_server_gone_is_server_unavailable(namespace: str) -> None:
    server = LocalServer().start()
    client = async_client(server.url, retry=NO_RETRY)
    queue = AsyncFairQueue(namespace=namespace, client=client)
    try:
        await queue.push(Task(user_id="u"))
        server.close()
        with pytest.raises(ServerUnavailable):
            await queue.push(Task(user_id="u"))
        with pytest.raises(ServerUnavailable):  # a new connection cannot be made
            await queue.push(Task(user_id="u"))
    finally:
        await queue.close()
        server.close()


async def test_a_client_closed_under_the_queue_connects_again(
    valkey: LocalServer, namespace: str
) -> None:
    client = async_client(valkey.url)
    async with AsyncFairQueue(namespace=namespace, client=client) as queue:
        await queue.push(Task(user_id="u"))
        first = connection_of(direct_of(queue.executor))
        await client.aclose()  # closes the connection the calls use, as all of its pool's
        assert first.error is not None
        assert await queue.push(Task(user_id="u", task_id="again")) == "again"


async def test_close_fails_a_call_waiting_for_its_connection(open_calls: OpenCalls) -> None:
    calls = open_calls()
    waiting = asyncio.create_task(calls.command("FCALL", "number", 0))
    await asyncio.sleep(0)  # the call waits for the connection
    await calls.close()
    with pytest.raises(RedisConnectionError):
        await waiting


async def test_close_fails_the_calls_in_flight_and_those_not_yet_written(
    open_calls: OpenCalls, admin: aioredis.Redis
) -> None:
    calls = open_calls()
    await connected_and_paused(calls, admin)
    sent = await held(calls, "sent")
    batched = asyncio.create_task(calls.command("FCALL", "echo", 0, "batched"))
    await asyncio.sleep(0)  # made while another is in flight: written at the turn's end
    await calls.close()
    for call in (sent, batched):
        with pytest.raises(RedisConnectionError):
            await call


async def test_a_forked_childs_calls_take_a_new_connection(open_calls: OpenCalls) -> None:
    calls = open_calls()
    await calls.command("FCALL", "number", 0)
    first = connection_of(calls)
    first.pid = -1  # as it looks from a forked child
    assert await calls.command("FCALL", "number", 0) == 42
    assert calls.connection is not first
    await first.aclose()


def test_each_event_loop_has_its_own_connection(valkey: LocalServer, namespace: str) -> None:
    executor = AsyncExecutor.connect(valkey.url)
    shard = AsyncFairQueue(namespace=namespace, executor=executor).namespace
    first_loop, second_loop = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        pushed = first_loop.run_until_complete(executor.execute(push_one(shard, Task(user_id="u"))))
        first = connection_of(direct_of(executor))
        again = second_loop.run_until_complete(executor.execute(push_one(shard, Task(user_id="u"))))
        assert direct_of(executor).connection is not first
        assert pushed != again
        first_loop.run_until_complete(first.aclose())  # left to its loop by the second
        second_loop.run_until_complete(executor.close())
    finally:
        first_loop.close()
        second_loop.close()


def test_a_loop_that_ends_while_connecting_fails_that_connection(valkey: LocalServer) -> None:
    client = async_client(valkey.url)
    calls = direct(client)

    async def leave_connecting() -> PipelinedConnection:
        asyncio.get_running_loop().create_task(calls.command("FCALL", "number", 0))
        await asyncio.sleep(0)  # the call makes the connection,
        await asyncio.sleep(0)  # which starts to connect
        return connection_of(calls)

    connection = asyncio.run(leave_connecting())  # its end cancels what still runs
    assert isinstance(connection.error, RedisConnectionError)

    async def call_and_close() -> Any:
        try:
            return await calls.command("FCALL", "number", 0)
        finally:
            await calls.close()
            await client.aclose()

    assert asyncio.run(call_and_close()) == 42


class Misbehaving:
    """A server on a free loopback port that answers whatever a connection sends first
    (redis-py's handshake) with +OK, then the first FCALL with ``answer``, or with a
    reset connection if ``answer`` is None."""

    def __init__(self, answer: bytes | None) -> None:
        self.answer = answer
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"redis://127.0.0.1:{port}"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        commands = hiredis.Reader()
        while data := await reader.read(65536):
            commands.feed(data)
            while (command := commands.gets()) is not False:
                if command[0].upper() != b"FCALL":
                    writer.write(b"+OK\r\n")
                elif self.answer is not None:
                    writer.write(self.answer)
                else:
                    linger = struct.pack("ii", 1, 0)  # closed at once: a reset, not an end
                    writer.get_extra_info("socket").setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, linger
                    )
                    writer.transport.abort()
                    return
            await writer.drain()
        writer.close()


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (b"?not a reply\r\n", InvalidResponse),  # not RESP
        (b":1\r\n:2\r\n", InvalidResponse),  # two replies to one command
        (None, RedisConnectionError),  # the connection reset
    ],
)
async def test_a_server_out_of_step_drops_the_connection(
    open_calls: OpenCalls, answer: bytes | None, error: type[Exception]
) -> None:
    async with Misbehaving(answer) as url:
        calls = open_calls(url, retry=NO_RETRY)
        first = asyncio.create_task(calls.command("FCALL", "f", 0))
        if answer == b":1\r\n:2\r\n":
            assert await first == 1
        else:
            with pytest.raises(error):
                await first
        await until_true(lambda: connection_of(calls).error is not None)
        assert isinstance(connection_of(calls).error, error)


class Traced(aioredis.Redis):
    """A client whose commands an instrumentation sees (as tracing wraps them)."""

    seen: list[Any]

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.seen.append(args[0])
        return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


async def test_other_clients_keep_redis_pys_path(
    valkey: LocalServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = valkey.url
    kept: list[aioredis.Redis | AsyncRedisCluster] = [
        aioredis.Redis.from_url(url, protocol=3),
        aioredis.Redis.from_url(url, single_connection_client=True),
        aioredis.Redis.from_url(url, max_connections=10),
        aioredis.Redis.from_url(url, health_check_interval=30),
        AsyncRedisCluster(host="127.0.0.1", port=1),  # never connects here
    ]
    assert [async_direct_calls(client) for client in kept] == [None] * len(kept)
    traced = cast("Traced", Traced.from_url(url))
    traced.seen = []
    assert async_direct_calls(traced) is None
    async with AsyncFairQueue(namespace=namespace, client=traced) as queue:
        await queue.push(Task(user_id="u"))
    assert "FCALL" in traced.seen
    single = aioredis.Redis.from_url(url, single_connection_client=True)
    async with AsyncFairQueue(namespace=namespace, client=single) as queue:
        assert one_server(queue.executor).direct is None
        assert await queue.push(Task(user_id="u", task_id="single")) == "single"
    # Wrapped after the client was made (an instrumentation set up later): seen too.
    async with AsyncFairQueue(url, namespace) as queue:
        assert direct_of(queue.executor).usable()
        seen: list[Any] = []
        plain = aioredis.Redis.execute_command

        async def wrapped(self: aioredis.Redis, *args: Any, **options: Any) -> Any:
            seen.append(args[0])
            return await plain(self, *args, **options)  # type: ignore[no-untyped-call]

        monkeypatch.setattr(aioredis.Redis, "execute_command", wrapped)
        assert not direct_of(queue.executor).usable()
        await queue.push(Task(user_id="u"))
        assert "FCALL" in seen
    for made in kept[:-1]:
        await made.aclose()
