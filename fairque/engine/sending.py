"""What the two executors share: the steps of a call that do no I/O, and the few steps
whose blocking and asyncio forms differ in more than ``await``, written here in both
forms (``x`` and ``async_x``, as httpcore's ``_synchronization.py`` holds its locks), so
that :mod:`fairque.engine.async_executor` is written once and
:mod:`fairque.engine.executor` is generated from it (``tools/unasync.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fairque.engine.calls import Call, Wait
from fairque.engine.connect import AsyncClient, SyncClient, async_client, sync_client
from fairque.engine.outage import connection_errors
from fairque.engine.pipelined import function_missing, script_failure
from fairque.engine.waiting import within
from fairque.errors import ServerTimeout, ServerUnavailable

T = TypeVar("T")

# How much longer than its wait a waiting call's reply may take before the connection
# counts as lost (a server that stopped answering).
WAIT_GRACE_SECONDS = 5.0


def unavailable(address: str, exc: BaseException, timeout: float | None) -> ServerUnavailable:
    """The fairque error for a server that did not answer a call (``timeout``: the
    client's socket timeout, which a ``ServerTimeout`` names)."""
    if isinstance(exc, RedisTimeoutError):
        return ServerTimeout(address, exc, timeout)
    return ServerUnavailable(address, exc, failing_over=isinstance(exc, ResponseError))


def waiting_commands(call: Call[Any], wait: Wait, ended_by_client: bool) -> list[tuple[Any, ...]]:
    """A waiting call's pipeline: the connection's id (so that another connection can end
    the wait early), the wait, and the call, which the server runs as soon as the wait
    ends, with no round trip in between. With ``ended_by_client`` the wait has no
    timeout of its own: the client ends it (``CLIENT UNBLOCK``) when its time is up, as
    a client blocked with a timeout costs the server a check of its timeouts at every
    turn of its event loop (~8k instructions a second, the most of an idle worker's)."""
    function = call.script.function
    seconds = "0" if ended_by_client else f"{wait.seconds:.3f}"
    return [
        ("CLIENT", "ID"),
        ("BLPOP", *wait.keys, seconds),
        ("FCALL", function, len(call.keys), *call.keys, *call.args),
    ]


@contextlib.asynccontextmanager
async def async_ended_after(
    seconds: float, end: Callable[[], Awaitable[None]]
) -> AsyncIterator[None]:
    """Runs ``end`` after ``seconds``, unless the block is left first; an ``end`` begun
    has finished when the block is left (its errors are ``end``'s to handle)."""
    begun: list[asyncio.Future[None]] = []
    handle = asyncio.get_running_loop().call_later(
        seconds, lambda: begun.append(asyncio.ensure_future(end()))
    )
    try:
        yield
    finally:
        handle.cancel()
        await asyncio.gather(*begun, return_exceptions=True)


@contextlib.contextmanager
def ended_after(seconds: float, end: Callable[[], None]) -> Iterator[None]:
    """Runs ``end`` after ``seconds`` (on a thread), unless the block is left first; an
    ``end`` begun has finished when the block is left."""
    timer = threading.Timer(seconds, end)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()


def connection_ids(reply: Any) -> list[int]:
    """The id of a waiting pipeline's connection, as a list: none where the ACL refuses
    ``CLIENT`` (nothing can end that wait early then; it runs its course)."""
    return [] if isinstance(reply, ResponseError) else [int(reply)]


def failed_after_wait(reply: Any) -> bool:
    """Raises the error of a waiting pipeline's call; True if the server did not have the
    script's function (send the call again, loading it). The call's reply decides, not
    the wait's: a call that ran stands, however its wait ended (a node demoted in a
    failover ends it with UNBLOCKED, then refuses the call with READONLY)."""
    if isinstance(reply, ResponseError):
        if function_missing(reply):
            return True
        raise script_failure(reply)
    return False


def executor_client(url: str) -> SyncClient:
    """The client of :meth:`Executor.connect`: redis-py's blocking client sends a command
    again on a new connection when its connection died (e.g. the server restarted)."""
    return sync_client(url)


def async_executor_client(url: str) -> AsyncClient:
    """The client of :meth:`AsyncExecutor.connect`, which retries as the blocking one
    does. Scripts refuse a duplicate effect."""
    return async_client(
        url,
        retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), 3),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
    )


# Where calls wait for a namespace's first-use call: one at a time.
Lock = threading.Lock
AsyncLock = asyncio.Lock

# A blocking connection raises its own errors when it closes under a command; an asyncio
# one may let another escape (:func:`fairque.engine.outage.connection_errors`).
stray_errors = contextlib.nullcontext
async_stray_errors = connection_errors


def gather(replies: Sequence[T]) -> list[T]:
    """The replies of calls sent one after the other, in order."""
    return list(replies)


async def async_gather(sending: Sequence[Awaitable[T]]) -> list[T]:
    """The replies of calls sent concurrently, in order."""
    if len(sending) == 1:  # no task for a lone call
        return [await sending[0]]
    return list(await asyncio.gather(*sending))


# The pooled connection a waiting call's pipeline runs on. Typed loosely: redis-py types
# its asyncio connection but not its blocking one, and the executors' code serves both.


@contextlib.contextmanager
def borrowed(pool: redis.ConnectionPool) -> Iterator[Any]:
    """A connection of ``pool``, given back after; dropped if it leaves with an error
    (a reply may be left unread: not for the next call)."""
    connection = pool.get_connection()
    try:
        yield connection
    except BaseException:
        connection.disconnect()  # type: ignore[no-untyped-call]
        raise
    finally:
        pool.release(connection)


@contextlib.asynccontextmanager
async def async_borrowed(pool: aioredis.ConnectionPool) -> AsyncIterator[Any]:
    """:func:`borrowed` for asyncio."""
    connection = await pool.get_connection()  # type: ignore[no-untyped-call]
    try:
        yield connection
    except BaseException:
        await connection.disconnect(nowait=True)
        raise
    finally:
        await pool.release(connection)


def read_reply(connection: Any, timeout: float | None = None) -> Any:
    """A reply of a pipeline (``timeout``: seconds to wait for it, else the socket
    timeout), its error reply returned rather than raised: the replies after it must be
    read too, or the connection would hand them to its next command."""
    try:
        if timeout is None:
            return connection.read_response()
        return connection.read_response(timeout=timeout)
    except ResponseError as exc:
        return exc


async def async_read_reply(connection: Any, timeout: float | None = None) -> Any:
    """:func:`read_reply` for asyncio."""
    if timeout is None:
        return await _reply_or_error(connection.read_response())
    try:
        # Bounded here: an explicit timeout of redis-py's read would give None and leave
        # the connection with a reply still to come.
        return await within(_reply_or_error(connection.read_response(timeout=math.inf)), timeout)
    except asyncio.TimeoutError:
        raise RedisTimeoutError("no answer to a waiting call") from None


async def _reply_or_error(read: Awaitable[Any]) -> Any:
    try:
        return await read
    except ResponseError as exc:
        return exc
