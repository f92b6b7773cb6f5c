"""Executors: send :class:`~fairque.engine.calls.Call` objects over one connection pool.

Every client of every entry point sends through an executor, and clients of one server
can share one (the JQ master's queue, jobs, scheduler and UI use a single pool). A
script is called as a function (``FCALL``); when the server does not have it, its library
is loaded (on every primary of a cluster) and the call sent again. An error reply of a
fairque script becomes its own exception (:func:`fairque.errors.from_script_error`).
"""

from __future__ import annotations

import asyncio
import functools
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.cluster import RedisCluster
from redis.exceptions import AuthenticationError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fairque.closing import AsyncCloseable, Closeable
from fairque.config import redis_url
from fairque.engine import replicated
from fairque.engine.async_direct import async_direct_calls
from fairque.engine.calls import Call, Replicas, Wait
from fairque.engine.connect import (
    AsyncClient,
    SyncClient,
    async_client,
    server_address,
    socket_timeout,
    sync_client,
)
from fairque.engine.direct import direct_calls
from fairque.engine.keys import Namespace
from fairque.engine.outage import SERVER_AWAY, connection_errors
from fairque.engine.waiting import within
from fairque.errors import ServerTimeout, ServerUnavailable

if TYPE_CHECKING:
    from fairque.engine.shards import Plan

T = TypeVar("T")

# How much longer than its wait a waiting call's reply may take before the connection
# counts as lost (a server that stopped answering).
WAIT_GRACE_SECONDS = 5.0


def _waiting_commands(call: Call[Any], wait: Wait) -> list[tuple[Any, ...]]:
    """A waiting call's pipeline: the connection's id (so that another connection can end
    the wait early), the wait, and the call, which the server runs as soon as the wait
    ends, with no round trip in between."""
    function = call.script.function
    return [
        ("CLIENT", "ID"),
        ("BLPOP", *wait.keys, f"{wait.seconds:.3f}"),
        ("FCALL", function, len(call.keys), *call.keys, *call.args),
    ]


# A cluster client has no per-command timeout: a wait is sent as BLPOPs of at most this
# long, each well within the socket timeout, and a stop_waits() ends it between two.
CLUSTER_WAIT_SLICE = 1.0


def cluster_wait_slices(seconds: float, client: Any) -> Iterator[float]:
    """The BLPOP timeouts of a wait of ``seconds`` on a cluster, until they add up: each
    at most half the client's socket timeout."""
    timeout = socket_timeout(client)
    longest = CLUSTER_WAIT_SLICE if timeout is None else min(CLUSTER_WAIT_SLICE, timeout / 2)
    deadline = time.monotonic() + seconds
    left = seconds
    while left > 0:
        yield max(0.001, min(left, longest))
        left = deadline - time.monotonic()


def unavailable(client: Any, exc: BaseException) -> ServerUnavailable:
    """The fairque error for a server that did not answer a call."""
    address = server_address(client)
    if isinstance(exc, RedisTimeoutError):
        return ServerTimeout(address, exc, socket_timeout(client))
    return ServerUnavailable(address, exc, failing_over=isinstance(exc, ResponseError))


def _reply_or_error(read: Callable[[], Any]) -> Any:
    """A reply of a pipeline, its error reply returned rather than raised: the replies
    after it must be read too, or the connection would hand them to its next command."""
    try:
        return read()
    except ResponseError as exc:
        return exc


async def _async_reply_or_error(read: Awaitable[Any]) -> Any:
    """:func:`_reply_or_error` for asyncio."""
    try:
        return await read
    except ResponseError as exc:
        return exc


def _connection_ids(reply: Any) -> list[int]:
    """The id of a waiting pipeline's connection, as a list: none where the ACL refuses
    ``CLIENT`` (nothing can end that wait early then; it runs its course)."""
    return [] if isinstance(reply, ResponseError) else [int(reply)]


def _failed_after_wait(reply: Any) -> bool:
    """Raises the error of a waiting pipeline's call; True if the server did not have the
    script's function (send the call again, loading it). The call's reply decides, not
    the wait's: a call that ran stands, however its wait ended (a node demoted in a
    failover ends it with UNBLOCKED, then refuses the call with READONLY)."""
    if isinstance(reply, ResponseError):
        if replicated.function_missing(reply):
            return True
        raise replicated.script_failure(reply)
    return False


class ExecutorState:
    """What both executors keep beside their client: the calls to send first, the
    connections in a wait, and how many times waits were stopped."""

    def __init__(self) -> None:
        self._first: dict[str, Call[Any]] = {}  # namespace prefix -> a call to send first
        self._blocked: set[int] = set()  # ids of the connections waiting for a signal
        self._stops = 0  # calls of stop_waits: a wait that saw one come ends itself

    def send_first(self, prefix: str, call: Call[Any]) -> None:
        """Sends ``call`` just before the next call to the namespace of ``prefix`` (a
        client's settings, written on first use rather than when it is made)."""
        self._first[prefix] = call

    @property
    def stop_count(self) -> int:
        """How many times ``stop_waits`` was called: an operation of several calls notes
        it when it begins and passes it to each call (``since``), so that a stop made
        between its calls ends its later waits too."""
        return self._stops


class Executor(ExecutorState):
    """Sends calls with a blocking redis-py client (a server or a cluster)."""

    def __init__(self, client: SyncClient) -> None:
        super().__init__()
        self.client = client
        self.direct = direct_calls(client)  # a plain client's calls skip redis-py's layers

    @classmethod
    def connect(cls, url: str | None = None) -> Executor:
        """An executor for ``url`` (else ``$FAIRQUE_REDIS_URL``, else the embedded Valkey)."""
        return cls(sync_client(redis_url(url)))

    def execute(self, call: Call[T], since: int | None = None) -> T:
        """Sends ``call``; its parsed reply. A server that does not answer raises
        :class:`~fairque.errors.ServerUnavailable` (or ``ServerTimeout``). A wait ends at
        once if :meth:`stop_waits` was called since ``stop_count`` was ``since``."""
        stops = self._stops if since is None else since
        try:
            if self._first:
                self._send_first(str(call.args[0]))
            if call.wait is not None:
                return self._send_after(call, call.wait, stops)
            if call.replicas is not None:
                return self._send_replicated(call, call.replicas)
            return self._send(call)
        except (ServerUnavailable, AuthenticationError):  # a refused password is no outage
            raise
        except SERVER_AWAY as exc:
            raise unavailable(self.client, exc) from exc

    def execute_all(self, calls: Sequence[Call[Any]], since: int | None = None) -> list[Any]:
        """Sends ``calls`` one after the other; their parsed replies in order."""
        return [self.execute(call, since) for call in calls]

    def run(self, plan: Plan[T]) -> T:
        """Sends a plan's calls (:mod:`fairque.engine.shards`), step by step; the
        operation's value."""
        if isinstance(plan, Call):
            return self.execute(plan)
        since = self.stop_count  # a stop_waits() from now on ends its waits
        try:
            step = next(plan)
            while True:
                step = plan.send(self.execute_all(step, since))
        except StopIteration as done:
            return cast("T", done.value)

    def _send_first(self, prefix: str) -> None:
        first = self._first.pop(prefix, None)
        if first is not None:
            try:
                self._send(first)
            except BaseException:
                self._first.setdefault(prefix, first)  # sent with the next call instead
                raise

    def _send(self, call: Call[T]) -> T:
        function = call.script.function
        keys_and_args = (*call.keys, *call.args)
        loads = 0
        try:
            while True:
                try:
                    reply = self._fcall(function, len(call.keys), keys_and_args)
                    break
                except ResponseError as exc:
                    if not replicated.function_missing(exc) or loads == replicated.LIBRARY_LOADS:
                        raise
                    self._load(call.script.library)
                    loads += 1
        except ResponseError as exc:
            raise replicated.script_failure(exc) from None
        return call.parse(reply)

    def _fcall(self, function: str, numkeys: int, keys_and_args: tuple[Any, ...]) -> Any:
        direct = self.direct
        if direct is not None and direct.usable():
            return direct.command("FCALL", function, numkeys, *keys_and_args)
        return self.client.fcall(function, numkeys, *keys_and_args)

    def _load(self, library: str) -> None:
        """Loads a script library (on the connection the calls use, when direct)."""
        direct = self.direct
        if direct is not None and direct.usable():
            direct.command("FUNCTION", "LOAD", "REPLACE", library)
        else:
            self.client.function_load(library, replace=True)

    def _send_after(self, call: Call[T], wait: Wait, stops: int) -> T:
        """Sends ``call`` after its wait: on one server in a pipeline behind the ``BLPOP``,
        on a cluster (whose client has no pipeline for this) after it. ``stops`` is the
        count of :meth:`stop_waits` calls when the call began: one made since, before the
        server had the wait, could not end it, so the wait ends itself."""
        if isinstance(self.client, RedisCluster):
            for seconds in cluster_wait_slices(wait.seconds, self.client):
                blpop = functools.partial(self.client.blpop, list(wait.keys), seconds)
                if self._stops != stops or _reply_or_error(blpop):
                    break
            return self._send(call)  # the call decides, as in the pipeline
        pool = self.client.connection_pool
        connection = pool.get_connection()
        try:
            commands = connection.pack_commands(_waiting_commands(call, wait))  # type: ignore[no-untyped-call]
            connection.send_packed_command(commands)  # type: ignore[no-untyped-call]
            ids = _connection_ids(_reply_or_error(connection.read_response))
            self._blocked.update(ids)
            try:
                if self._stops != stops:
                    self._unblock(ids)
                _reply_or_error(
                    lambda: connection.read_response(timeout=wait.seconds + WAIT_GRACE_SECONDS)
                )
            finally:
                self._blocked.difference_update(ids)
            reply = _reply_or_error(connection.read_response)
        finally:
            pool.release(connection)
        if _failed_after_wait(reply):
            return self._send(call)  # loads the library and sends the call now
        return call.parse(reply)

    def stop_waits(self) -> None:
        """Ends the waits of this executor's calls in progress now (``CLIENT UNBLOCK``):
        each call is sent at once. A server that refuses (an ACL without ``CLIENT``) lets
        them run to their end."""
        self._stops += 1
        self._unblock(list(self._blocked))

    def _unblock(self, client_ids: list[int]) -> None:
        try:
            for client_id in client_ids:
                self.client.client_unblock(client_id)
        except ResponseError:
            pass

    def _send_replicated(self, call: Call[T], replicas: Replicas) -> T:
        """Sends ``call``, then waits until enough replicas have it (``WAIT``)."""
        pipe = replicated.pipeline(self.client, call, replicas, load=False)
        results = pipe.execute(raise_on_error=False)
        loads = 0  # the load and the call in one pipeline; again if the function went meanwhile
        while replicated.needs_library(results) and loads < replicated.LIBRARY_LOADS:
            pipe = replicated.pipeline(self.client, call, replicas, load=True)
            results = pipe.execute(raise_on_error=False)
            loads += 1
        return replicated.replicated_reply(call, results, replicas)

    def ping(self) -> None:
        """Returns once the server answers; raises a connection error if it does not."""
        self.client.ping()

    def close(self) -> None:
        """Closes the connection pool."""
        if self.direct is not None:
            self.direct.close()
        self.client.close()


class AsyncExecutor(ExecutorState):
    """:class:`Executor` for asyncio: sends calls with an asyncio redis-py client."""

    def __init__(self, client: AsyncClient) -> None:
        super().__init__()
        self.client = client
        self.direct = async_direct_calls(client)  # a plain client's calls skip redis-py's layers

    @classmethod
    def connect(cls, url: str | None = None) -> AsyncExecutor:
        """An executor for ``url`` (else ``$FAIRQUE_REDIS_URL``, else the embedded Valkey)."""
        # Like redis-py's blocking client: a command on a connection that died (e.g. the
        # server restarted) is retried on a new one. Scripts refuse a duplicate effect.
        return cls(
            async_client(
                redis_url(url),
                retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=1.0), 3),
                retry_on_error=[RedisConnectionError, RedisTimeoutError],
            )
        )

    async def execute(self, call: Call[T], since: int | None = None) -> T:
        """Sends ``call``; its parsed reply (see :meth:`Executor.execute`)."""
        # Before anything is awaited: a stop from then on ends the wait.
        stops = self._stops if since is None else since
        try:
            if self._first:
                await self._send_first(str(call.args[0]))
            if call.wait is not None:
                return await self._send_after(call, call.wait, stops)
            if call.replicas is not None:
                return await self._send_replicated(call, call.replicas)
            return await self._send(call)
        except (ServerUnavailable, AuthenticationError):  # a refused password is no outage
            raise
        except SERVER_AWAY as exc:
            raise unavailable(self.client, exc) from exc

    async def execute_all(self, calls: Sequence[Call[Any]], since: int | None = None) -> list[Any]:
        """Sends ``calls`` concurrently; their parsed replies in order."""
        if len(calls) == 1:
            return [await self.execute(calls[0], since)]
        return list(await asyncio.gather(*(self.execute(call, since) for call in calls)))

    async def run(self, plan: Plan[T]) -> T:
        """Sends a plan's calls (see :meth:`Executor.run`), the calls of a step at once."""
        if isinstance(plan, Call):
            return await self.execute(plan)
        since = self.stop_count  # a stop_waits() from now on ends its waits
        try:
            step = next(plan)
            while True:
                step = plan.send(await self.execute_all(step, since))
        except StopIteration as done:
            return cast("T", done.value)

    async def _send_first(self, prefix: str) -> None:
        first = self._first.pop(prefix, None)
        if first is not None:
            try:
                await self._send(first)
            except BaseException:
                self._first.setdefault(prefix, first)  # sent with the next call instead
                raise

    async def _send(self, call: Call[T]) -> T:
        function = call.script.function
        keys_and_args = (*call.keys, *call.args)
        loads = 0
        try:
            while True:
                try:
                    reply = await self._fcall(function, len(call.keys), keys_and_args)
                    break
                except ResponseError as exc:
                    if not replicated.function_missing(exc) or loads == replicated.LIBRARY_LOADS:
                        raise
                    await self._load(call.script.library)
                    loads += 1
        except ResponseError as exc:
            raise replicated.script_failure(exc) from None
        return call.parse(reply)

    async def _fcall(self, function: str, numkeys: int, keys_and_args: tuple[Any, ...]) -> Any:
        direct = self.direct
        if direct is not None and direct.usable():
            return await direct.command("FCALL", function, numkeys, *keys_and_args)
        with connection_errors():
            return await self.client.fcall(function, numkeys, *keys_and_args)

    async def _load(self, library: str) -> None:
        """Loads a script library (on the connection the calls use, when direct)."""
        direct = self.direct
        if direct is not None and direct.usable():
            await direct.command("FUNCTION", "LOAD", "REPLACE", library)
        else:
            with connection_errors():
                await self.client.function_load(library, replace=True)

    async def _send_after(self, call: Call[T], wait: Wait, stops: int) -> T:
        """Sends ``call`` after its wait (see :meth:`Executor._send_after`)."""
        if isinstance(self.client, AsyncRedisCluster):
            for seconds in cluster_wait_slices(wait.seconds, self.client):
                with connection_errors():
                    signalled = await _async_reply_or_error(
                        self.client.blpop(list(wait.keys), seconds)
                    )
                if signalled or self._stops != stops:
                    break
            return await self._send(call)  # the call decides, as in the pipeline
        pool = self.client.connection_pool
        with connection_errors():
            connection = await pool.get_connection()  # type: ignore[no-untyped-call]
            try:
                await connection.send_packed_command(
                    connection.pack_commands(_waiting_commands(call, wait))
                )
                ids = _connection_ids(await _async_reply_or_error(connection.read_response()))
                self._blocked.update(ids)
                try:
                    if self._stops != stops:
                        await self._unblock(ids)
                    # Bounded here: an explicit timeout of redis-py's read would give None
                    # and leave the connection with a reply still to come.
                    await within(
                        _async_reply_or_error(connection.read_response(timeout=math.inf)),
                        wait.seconds + WAIT_GRACE_SECONDS,
                    )
                except asyncio.TimeoutError:
                    raise RedisTimeoutError("no answer to a waiting call") from None
                finally:
                    self._blocked.difference_update(ids)
                reply = await _async_reply_or_error(connection.read_response())
            finally:
                await pool.release(connection)
        if _failed_after_wait(reply):
            return await self._send(call)  # loads the library and sends the call now
        return call.parse(reply)

    async def stop_waits(self) -> None:
        """Ends the waits of this executor's calls in progress now (see
        :meth:`Executor.stop_waits`)."""
        self._stops += 1
        await self._unblock(list(self._blocked))

    async def _unblock(self, client_ids: list[int]) -> None:
        try:
            for client_id in client_ids:
                await self.client.client_unblock(client_id)
        except ResponseError:
            pass

    async def _send_replicated(self, call: Call[T], replicas: Replicas) -> T:
        """Sends ``call``, then waits until enough replicas have it (``WAIT``)."""
        with connection_errors():
            if isinstance(self.client, AsyncRedisCluster):
                await self.client.initialize()  # the pipeline needs the slot's node
            pipe = replicated.pipeline(self.client, call, replicas, load=False)
            results: list[Any] = await pipe.execute(raise_on_error=False)
            loads = 0  # as in Executor._send_replicated
            while replicated.needs_library(results) and loads < replicated.LIBRARY_LOADS:
                pipe = replicated.pipeline(self.client, call, replicas, load=True)
                results = await pipe.execute(raise_on_error=False)
                loads += 1
        return replicated.replicated_reply(call, results, replicas)

    async def ping(self) -> None:
        """Returns once the server answers; raises a connection error if it does not."""
        with connection_errors():
            await self.client.ping()

    async def close(self) -> None:
        """Closes the connection pool."""
        if self.direct is not None:
            await self.direct.close()
        await self.client.aclose()


class Bound(Protocol):
    """A client bound to one namespace, sending through an :class:`Executor`: another
    entry point's client may be built on it, sharing its connection pool."""

    @property
    def executor(self) -> Executor: ...

    @property
    def namespace(self) -> Namespace: ...


class AsyncBound(Protocol):
    """:class:`Bound` for asyncio clients."""

    @property
    def executor(self) -> AsyncExecutor: ...

    @property
    def namespace(self) -> Namespace: ...


class Closing(Closeable):
    """``close()`` and ``with`` for a client that sends through an :class:`Executor` and
    closes it only if it opened it (``owns_executor``)."""

    executor: Executor
    owns_executor: bool

    def close(self) -> None:
        """Closes the connection pool, unless it is shared with another client."""
        if self.owns_executor:
            self.executor.close()


class AsyncClosing(AsyncCloseable):
    """:class:`Closing` for asyncio clients: ``await close()`` and ``async with``."""

    executor: AsyncExecutor
    owns_executor: bool

    async def close(self) -> None:
        """Closes the connection pool, unless it is shared with another client."""
        if self.owns_executor:
            await self.executor.close()
