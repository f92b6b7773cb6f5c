"""Script calls sent straight on one pipelined connection of a plain asyncio redis-py client.

The asyncio twin of :mod:`fairque.engine.direct`. redis-py asyncio's
``execute_command`` spends more client CPU on a call than the send and the read: the
pool's checkout and return (their locks, a check that the connection is clean, the
metrics recorder's look-ups), a ``wait_for`` around the send, a timeout context around
the read, the retry's closures. For a plain ``redis.asyncio.Redis`` this module takes
one connection from the client's pool, which connects it (AUTH, SELECT, HELLO, CLIENT
SETINFO, TLS, unix sockets stay redis-py's), and keeps it for the executor's calls in
one event loop: it takes its transport over with a protocol of its own
(:class:`PipelinedConnection`), writes each ``FCALL`` (or the ``FUNCTION LOAD`` of a
library the server lost) packed by hiredis, and resolves the callers' futures in order
as a hiredis reader parses the replies. Many coroutines can have calls in flight on it
at once, as ioredis has, and nothing runs between the replies arriving and their
callers waking but the parse.

What callers see is what ``fcall`` gives: the reply, an error reply as the
``ResponseError`` redis-py would raise (the connection goes on), a lost connection as
``ConnectionError`` for every call in flight (the connection is given back to the pool
disconnected, and the next call takes another), no reply within the client's
``socket_timeout`` as ``TimeoutError`` (the connection is dropped: a reply after that
would answer the wrong call). A call that failed on a connection is sent again under
the client's retry policy, as redis-py's ``execute_command`` retries a command; a
failure to connect is not, as a failure of redis-py's checkout is not (the connection
retried its connect already). A caller cancelled with its call in flight leaves the
call's reply to be read and dropped. A connection serves the event loop and the process
that made it: a call from another loop (the executor used under a new ``asyncio.run``)
or a forked child takes another, and the old one is left to its loop.

Anything else keeps redis-py's path, as for the blocking client (see
:func:`fairque.engine.direct.plain_pool` and :func:`~fairque.engine.direct.still_plain`),
and also a client of one connection (``single_connection_client``), a pool of fewer
connections than :data:`~fairque.engine.direct.HOLD_FROM_POOLS_OF` (the one kept for
good would starve the other commands), a parser class of the client's own, and health
checks (``health_check_interval``), which redis-py runs before a command.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections import deque
from typing import Any

import hiredis
import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection, ConnectionPool, DefaultParser
from redis.asyncio.retry import Retry
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, RedisError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fairque.engine.connect import server_address
from fairque.engine.direct import HOLD_FROM_POOLS_OF, plain_pool, still_plain

_PLAIN_EXECUTE = aioredis.Redis.execute_command  # as redis-py defines it, unless patched already
_INCOMPLETE = object()  # what the hiredis reader gives while no reply is complete


class PipelinedConnection(asyncio.Protocol):
    """One connection of a pool, taken from it for calls in flight at once on ``loop``:
    each command is written as it comes, and its caller's future resolved when its
    reply, in the same order, is read. Connects at once (in a task: the first calls wait
    for it), and closes for good at its first failure (:meth:`close`), failing every call
    in flight; the connection then goes back to the pool, disconnected."""

    def __init__(self, pool: ConnectionPool, loop: asyncio.AbstractEventLoop, address: str) -> None:
        self.pool = pool
        self.address = address  # for error messages
        self.loop = loop
        self.pid = os.getpid()
        self.connection: AbstractConnection | None = None  # once connected
        self.transport: asyncio.Transport | None = None  # once connected
        self.stream: asyncio.BaseProtocol | None = None  # redis-py's own, told of the end
        self.reader = hiredis.Reader(notEnoughData=_INCOMPLETE)  # the connection's, once made
        self.timeout: float | None = None  # the connection's socket_timeout
        self.unsent: list[tuple[bytes, asyncio.Future[Any]]] = []  # made while connecting
        # The futures of the commands sent, in order, with the time their reply is due.
        self.in_flight: deque[tuple[asyncio.Future[Any], float]] = deque()
        self.timer: asyncio.TimerHandle | None = None  # due when the oldest reply is
        # Commands made while others are in flight, written together at the end of the
        # loop's turn: one system call for the calls of many coroutines.
        self.batch: list[bytes] = []
        self.error: BaseException | None = None  # why it closed, once it did
        self.tasks = [loop.create_task(self._connect())]  # kept until they end

    @property
    def retry(self) -> Retry | None:
        """The connection's retry policy (the client's), once connected."""
        return None if self.connection is None else self.connection.retry

    def serves(self, loop: asyncio.AbstractEventLoop) -> bool:
        """True if calls made in ``loop`` can go on this connection."""
        return self.error is None and self.loop is loop and self.pid == os.getpid()

    def send(self, packed: bytes) -> asyncio.Future[Any]:
        """Sends a packed command; the future of its reply."""
        future = self.loop.create_future()
        if self.transport is None:
            self.unsent.append((packed, future))
        else:
            self._write(packed, future)
        return future

    def _write(self, packed: bytes, future: asyncio.Future[Any]) -> None:
        if self.in_flight:  # written with the others made in this turn of the loop
            if not self.batch:
                self.loop.call_soon(self._write_batch)
            self.batch.append(packed)
        else:  # alone: at once
            assert self.transport is not None
            self.transport.write(packed)
        if self.timeout is None:
            self.in_flight.append((future, math.inf))  # its reply is never late
            return
        due = self.loop.time() + self.timeout
        self.in_flight.append((future, due))
        if self.timer is None:
            self.timer = self.loop.call_at(due, self._check_due)

    def _write_batch(self) -> None:
        batch, self.batch = self.batch, []
        if self.error is None:  # else its calls failed already
            assert self.transport is not None
            self.transport.write(b"".join(batch))

    async def _connect(self) -> None:
        try:
            connection = await self.pool.get_connection()  # type: ignore[no-untyped-call]
        except Exception as exc:  # the calls waiting fail as redis-py's checkout would
            self.close(exc)
            return
        except BaseException:  # cancelled: the loop ends
            self.close(RedisConnectionError("Connection closed by the client."))
            raise
        if self.error is not None:  # closed meanwhile: the connection is fine for others
            await self.pool.release(connection)
            return
        self.timeout = connection.socket_timeout
        encoding = connection.encoder
        options = {"encoding": encoding.encoding} if encoding.decode_responses else {}
        self.reader = hiredis.Reader(
            protocolError=InvalidResponse,
            replyError=DefaultParser.parse_error,  # error replies as redis-py's exceptions
            notEnoughData=_INCOMPLETE,
            errors=encoding.encoding_errors,
            **options,
        )
        # redis-py's connection has no public transport: its stream writer's is the one.
        assert connection._writer is not None
        transport = connection._writer.transport
        self.stream = transport.get_protocol()
        transport.set_protocol(self)
        self.connection = connection
        self.transport = transport
        unsent, self.unsent = self.unsent, []
        for packed, future in unsent:
            if not future.done():  # a caller cancelled meanwhile has nothing sent
                self._write(packed, future)

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        try:
            reply = reader.gets()
            while reply is not _INCOMPLETE and self._answer(reply):
                reply = reader.gets()
        except InvalidResponse as exc:  # the reader's: not a reply
            self.close(exc)

    def _answer(self, reply: Any) -> bool:
        """Gives ``reply`` to the oldest call in flight; False if the connection closed
        instead (what is left of the replies read is not for the calls after it)."""
        if not self.in_flight:
            self.close(InvalidResponse(f"a reply to no command: {reply!r}"))
            return False
        lost = _connection_error(reply)
        if lost is not None:  # redis-py disconnects: all in flight fail (to be retried)
            self.close(lost)
            return False
        future = self.in_flight.popleft()[0]
        if not future.done():  # else its caller was cancelled: the reply is dropped
            if isinstance(reply, ResponseError):
                future.set_exception(reply)
            else:
                future.set_result(reply)
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is None:
            error = RedisConnectionError("Connection closed by server.")
        else:
            error = RedisConnectionError(f"Error while reading from {self.address}: {exc}")
        self.close(error)
        assert self.stream is not None  # set before this protocol took the transport
        self.stream.connection_lost(exc)  # redis-py's writer's wait_closed() returns

    def _check_due(self) -> None:
        """Drops the connection if its oldest reply is late (the replies come in order:
        its lateness is every later one's); else waits for that reply's time."""
        self.timer = None
        if not self.in_flight:
            return
        due = self.in_flight[0][1]
        if self.loop.time() >= due:
            self.close(RedisTimeoutError(f"Timeout reading from {self.address}"))
        else:
            self.timer = self.loop.call_at(due, self._check_due)

    def close(self, error: BaseException) -> None:
        """Fails every call in flight and every call not yet sent with ``error``, drops
        the connection and gives it back to the pool. Once: later calls do nothing."""
        if self.error is not None:
            return
        self.error = error
        if self.timer is not None:
            self.timer.cancel()
        waiting = [future for future, _ in self.in_flight]
        waiting += [future for _, future in self.unsent]
        self.in_flight.clear()
        self.unsent.clear()
        for future in waiting:
            if not future.done():
                future.set_exception(error)
        if self.transport is not None:
            self.transport.abort()
            self.tasks.append(self.loop.create_task(self._give_back()))

    async def _give_back(self) -> None:
        assert self.connection is not None
        await self.connection.disconnect(nowait=True)
        await self.pool.release(self.connection)

    async def aclose(self) -> None:
        """Closes it, calls in flight failing, and waits until the pool has its
        connection back."""
        self.close(RedisConnectionError("Connection closed by the client."))
        await asyncio.gather(*self.tasks, return_exceptions=True)


class AsyncDirectCalls:
    """Sends ``FCALL`` on a :class:`PipelinedConnection` of ``client``, a plain
    ``redis.asyncio.Redis`` (see :func:`async_direct_calls`): one connection at a time,
    made in the event loop of the call that needs it."""

    def __init__(self, client: aioredis.Redis) -> None:
        self.client = client
        self.address = server_address(client)
        self.connection: PipelinedConnection | None = None

    def usable(self) -> bool:
        """False once something needs redis-py's path (see :func:`still_plain`)."""
        return still_plain(self.client, _PLAIN_EXECUTE)

    async def command(self, *args: Any) -> Any:
        """The reply of the command ``args`` (``FCALL``, ``FUNCTION LOAD``: a command
        with no response callback in redis-py), as ``client.execute_command`` gives it."""
        try:
            packed = hiredis.pack_command(args)
        except TypeError:  # an argument hiredis cannot pack: redis-py's DataError says which
            return await self.client.execute_command(*args)  # type: ignore[no-untyped-call]
        connection = self._connection()
        try:
            return await connection.send(packed)
        except (RedisConnectionError, RedisTimeoutError) as exc:
            retry = connection.retry
            if retry is None:  # it did not connect, after its own retries
                raise
            return await self._retry(retry, packed, exc)

    async def _retry(self, retry: Retry, packed: bytes, failure: Exception) -> Any:
        """Sends ``packed`` again under the client's retry policy after its first send
        failed with ``failure``, as redis-py's ``execute_command`` would: the policy
        sees that failure first, as if it had made it (the first send went without the
        policy's machinery, which a call that succeeds does not need)."""
        failures = [failure]

        async def attempt() -> Any:
            if failures:
                raise failures.pop()
            return await self._connection().send(packed)

        return await retry.call_with_retry(attempt, _nothing_to_undo)

    def _connection(self) -> PipelinedConnection:
        """The connection for a call made now: the one in use if it serves this loop,
        else a new one (a connection of another loop is left to it)."""
        loop = asyncio.get_running_loop()
        connection = self.connection
        if connection is None or not connection.serves(loop):
            connection = PipelinedConnection(self.client.connection_pool, loop, self.address)
            self.connection = connection
        return connection

    async def release_unused(self) -> None:
        """Gives the connection back to the pool, closed, if no call is in flight on it
        (the next call opens one again)."""
        connection = self.connection
        if (
            connection is not None
            and connection.loop is asyncio.get_running_loop()
            and not connection.in_flight
            and not connection.unsent
        ):
            self.connection = None
            await connection.aclose()

    async def close(self) -> None:
        """Closes the connection in use (its calls in flight fail) and gives it back to
        the pool, if it is this loop's."""
        connection = self.connection
        if connection is not None and connection.loop is asyncio.get_running_loop():
            self.connection = None
            await connection.aclose()


async def _nothing_to_undo(_error: Exception) -> None:
    """A failed send's connection closed itself (redis-py's retries disconnect it)."""


def async_direct_calls(client: Any) -> AsyncDirectCalls | None:
    """An :class:`AsyncDirectCalls` for ``client`` if it is a plain ``redis.asyncio.Redis``
    whose calls can go straight to a connection, else None (see the module's docstring)."""
    if not isinstance(client, aioredis.Redis) or client.single_connection_client:
        return None
    pool = client.connection_pool
    options = pool.connection_kwargs
    if (
        not plain_pool(pool)
        or getattr(pool, "max_connections", 0) < HOLD_FROM_POOLS_OF
        or options.get("parser_class", DefaultParser) is not DefaultParser
        or options.get("health_check_interval")
    ):
        return None
    direct = AsyncDirectCalls(client)
    return direct if direct.usable() else None


def _connection_error(reply: Any) -> RedisError | None:
    """The error of a reply that redis-py raises as a connection's (after which it
    disconnects): an error reply it maps to a ``ConnectionError`` (``LOADING``, too many
    clients), alone or first in an array."""
    if isinstance(reply, RedisConnectionError):
        return reply
    if type(reply) is list and reply and isinstance(reply[0], RedisConnectionError):
        return reply[0]
    return None
