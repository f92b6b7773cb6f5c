"""Executors: send :class:`~fairque.engine.calls.Call` objects over one connection pool.

Every client of every entry point sends through an executor, and clients of one server
can share one (the JQ master's queue, jobs, scheduler and UI use a single pool). A
script is called as a function (``FCALL``); when the server does not have it, its library
is loaded and the call sent again. An error reply of a fairque script becomes its own
exception (:func:`fairque.errors.from_script_error`).

A call goes where its route says (:mod:`fairque.engine.routes`): the one server, or the
primary of a cluster that serves the call's slot, on a plain client of that node, so
that a waiting call's pipeline and a write's ``WAIT`` run on the connection that runs
the call, on a cluster as on one server. A node's error that means the cluster changed
(a failover, a moved slot) sends the call again where the route then says.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import AuthenticationError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fairque.closing import AsyncCloseable, Closeable
from fairque.config import redis_url
from fairque.engine import pipelined
from fairque.engine.calls import Call, Wait
from fairque.engine.cluster import ROUTE_ATTEMPTS
from fairque.engine.connect import (
    AsyncClient,
    SyncClient,
    async_client,
    server_address,
    socket_timeout,
    sync_client,
)
from fairque.engine.keys import Namespace
from fairque.engine.outage import SERVER_AWAY, connection_errors
from fairque.engine.pipelined import Pipelined, pipeline
from fairque.engine.routes import AsyncNode, SyncNode, async_route_of, describe, route_of
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


def unavailable(address: str, exc: BaseException, timeout: float | None) -> ServerUnavailable:
    """The fairque error for a server that did not answer a call (``timeout``: the
    client's socket timeout, which a ``ServerTimeout`` names)."""
    if isinstance(exc, RedisTimeoutError):
        return ServerTimeout(address, exc, timeout)
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
        if pipelined.function_missing(reply):
            return True
        raise pipelined.script_failure(reply)
    return False


class ExecutorState:
    """What both executors keep beside their client: the calls to send first, the
    connections in a wait, and how many times waits were stopped."""

    def __init__(self) -> None:
        self._first: dict[str, Call[Any]] = {}  # namespace prefix -> a call to send first
        # The connections waiting for a signal: (their node's address, their id).
        self._blocked: set[tuple[str, int]] = set()
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
        self._first_lock = threading.Lock()  # calls of other threads wait for a first use
        self.route = route_of(client)

    @classmethod
    def connect(cls, url: str | None = None) -> Executor:
        """An executor for ``url`` (else ``$FAIRQUE_REDIS_URL``, else the embedded Valkey)."""
        return cls(sync_client(redis_url(url)))

    def client_for(self, key: str) -> redis.Redis:
        """The plain client of the server that holds ``key``: the one server, or the
        cluster's primary for its slot (for a subscription to a sharded channel)."""
        try:
            return self.route.node_for(key).client
        except SERVER_AWAY as exc:
            raise unavailable(describe(self.route), exc, socket_timeout(self.client)) from exc

    def lost(self, key: str) -> None:
        """A connection to ``key``'s server failed outside a call (a subscription's): on
        a cluster, the nodes are asked for the map again, so that the next
        :meth:`client_for` names the slot's primary now."""
        with contextlib.suppress(*SERVER_AWAY):
            self.route.rerouted(key, self.route.node_for(key), RedisConnectionError(key))

    def execute(self, call: Call[T], since: int | None = None) -> T:
        """Sends ``call``; its parsed reply. A server that does not answer raises
        :class:`~fairque.errors.ServerUnavailable` (or ``ServerTimeout``) naming it. A
        wait ends at once if :meth:`stop_waits` was called since ``stop_count`` was
        ``since``."""
        stops = self._stops if since is None else since
        if self._first:
            self._send_first(str(call.args[0]))
        return self._routed(call, stops)

    def execute_all(self, calls: Sequence[Call[Any]], since: int | None = None) -> list[Any]:
        """Sends ``calls`` one after the other; their parsed replies in order."""
        return [self.execute(call, since) for call in calls]

    def run(self, plan: Plan[T]) -> T:
        """Sends a plan's calls (:mod:`fairque.engine.shards`), step by step; the
        operation's value. A step's error is raised inside the plan, where the yield of
        that step is: a plan may go on without a shard that is away."""
        if isinstance(plan, Call):
            return self.execute(plan)
        since = self.stop_count  # a stop_waits() from now on ends its waits
        try:
            step = next(plan)
            while True:
                try:
                    replies = self.execute_all(step, since)
                except Exception as exc:  # noqa: PERF203 - the plan may catch it: raised in it
                    step = plan.throw(exc)
                else:
                    step = plan.send(replies)
        except StopIteration as done:
            return cast("T", done.value)

    def _send_first(self, prefix: str) -> None:
        """Sends the namespace's first-use call, if it is still to send; a call of another
        thread meanwhile waits for its answer (it may refuse the namespace: then nothing
        else may be sent)."""
        with self._first_lock:
            first = self._first.get(prefix)
            if first is not None:
                self._routed(first, self._stops)  # on failure, kept: sent with the next call
                del self._first[prefix]

    def _routed(self, call: Call[T], stops: int) -> T:
        """Sends ``call`` where the route says, and again where it says next after an
        error that moved it (a failover, a moved slot), a few times at most."""
        key = call.keys[0]
        try:
            node = self.route.node_for(key)
        except SERVER_AWAY as exc:  # no node of a cluster answered
            raise unavailable(describe(self.route), exc, socket_timeout(self.client)) from exc
        asking = False
        for attempt in range(1, ROUTE_ATTEMPTS + 1):  # pragma: no branch - returns or raises
            try:
                if asking:
                    return self._send_pipelined(node, Pipelined(call, call.replicas, asking))
                return self._send_on(node, call, stops)
            except AuthenticationError:  # noqa: PERF203 - a refused password is no outage
                raise
            except SERVER_AWAY as exc:
                try:
                    step = (
                        None if attempt == ROUTE_ATTEMPTS else self.route.rerouted(key, node, exc)
                    )
                except SERVER_AWAY:
                    step = None  # no node answered: the node's own error says most
                if step is None:
                    raise unavailable(
                        server_address(node.client), exc, socket_timeout(node.client)
                    ) from exc
                node, asking = step
        raise AssertionError("unreachable")  # pragma: no cover

    def _send_on(self, node: SyncNode, call: Call[T], stops: int) -> T:
        if call.wait is not None:
            return self._send_after(node, call, call.wait, stops)
        if call.replicas is not None:
            return self._send_pipelined(node, Pipelined(call, call.replicas))
        return self._send(node, call)

    def _send(self, node: SyncNode, call: Call[T]) -> T:
        function = call.script.function
        keys_and_args = (*call.keys, *call.args)
        loads = 0
        try:
            while True:
                try:
                    reply = self._fcall(node, function, len(call.keys), keys_and_args)
                    break
                except ResponseError as exc:
                    if not pipelined.function_missing(exc) or loads == pipelined.LIBRARY_LOADS:
                        raise
                    self._load(node, call.script.library)
                    loads += 1
        except ResponseError as exc:
            raise pipelined.script_failure(exc) from None
        return call.parse(reply)

    @staticmethod
    def _fcall(node: SyncNode, function: str, numkeys: int, keys_and_args: tuple[Any, ...]) -> Any:
        direct = node.direct
        if direct is not None and direct.usable():
            return direct.command("FCALL", function, numkeys, *keys_and_args)
        return node.client.fcall(function, numkeys, *keys_and_args)

    @staticmethod
    def _load(node: SyncNode, library: str) -> None:
        """Loads a script library (on the connection the calls use, when direct)."""
        direct = node.direct
        if direct is not None and direct.usable():
            direct.command("FUNCTION", "LOAD", "REPLACE", library)
        else:
            node.client.function_load(library, replace=True)

    def _send_after(self, node: SyncNode, call: Call[T], wait: Wait, stops: int) -> T:
        """Sends ``call`` after its wait, in a pipeline behind the ``BLPOP``. ``stops`` is
        the count of :meth:`stop_waits` calls when the call began: one made since, before
        the server had the wait, could not end it, so the wait ends itself."""
        pool = node.client.connection_pool
        connection = pool.get_connection()
        try:
            commands = connection.pack_commands(_waiting_commands(call, wait))  # type: ignore[no-untyped-call]
            connection.send_packed_command(commands)  # type: ignore[no-untyped-call]
            blocked = {
                (node.address, i)
                for i in _connection_ids(_reply_or_error(connection.read_response))
            }
            self._blocked |= blocked
            try:
                if self._stops != stops:
                    self._unblock(blocked)
                _reply_or_error(
                    lambda: connection.read_response(timeout=wait.seconds + WAIT_GRACE_SECONDS)
                )
            finally:
                self._blocked -= blocked
            reply = _reply_or_error(connection.read_response)
        except BaseException:  # a reply may be left unread: not for the next call
            connection.disconnect()  # type: ignore[no-untyped-call]
            raise
        finally:
            pool.release(connection)
        if _failed_after_wait(reply):
            return self._send(node, call)  # loads the library and sends the call now
        return call.parse(reply)

    def stop_waits(self) -> None:
        """Ends the waits of this executor's calls in progress now (``CLIENT UNBLOCK``):
        each call is sent at once. A server that refuses (an ACL without ``CLIENT``) lets
        them run to their end."""
        self._stops += 1
        self._unblock(set(self._blocked))

    def _unblock(self, blocked: set[tuple[str, int]]) -> None:
        try:
            for at, client_id in blocked:
                self.route.node(at).client.client_unblock(client_id)
        except ResponseError:
            pass

    @staticmethod
    def _send_pipelined(node: SyncNode, sent: Pipelined[T]) -> T:
        """Sends a call in a pipeline (after ``ASKING``, or followed by ``WAIT``)."""
        results = pipeline(node.client, sent).execute(raise_on_error=False)
        loads = 0  # the load and the call in one pipeline; again if the function went meanwhile
        while sent.needs_library(results) and loads < pipelined.LIBRARY_LOADS:
            sent = sent.loading()
            results = pipeline(node.client, sent).execute(raise_on_error=False)
            loads += 1
        return sent.reply(results)

    def ping(self) -> None:
        """Returns once every primary answers (the one server, or each primary of a
        cluster's map); raises a connection error if one does not."""
        for node in self.route.primaries():
            node.client.ping()

    def close(self) -> None:
        """Closes the connection pools."""
        self.route.close()
        self.client.close()


class AsyncExecutor(ExecutorState):
    """:class:`Executor` for asyncio: sends calls with an asyncio redis-py client."""

    def __init__(self, client: AsyncClient) -> None:
        super().__init__()
        self.client = client
        # The first-use calls in flight, by namespace prefix: other calls wait for them.
        self._first_sending: dict[str, asyncio.Future[Any]] = {}
        self.route = async_route_of(client)

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

    async def client_for(self, key: str) -> aioredis.Redis:
        """The plain client of the server that holds ``key`` (see
        :meth:`Executor.client_for`)."""
        try:
            with connection_errors():
                node = await self.route.node_for(key)
        except SERVER_AWAY as exc:
            raise unavailable(describe(self.route), exc, socket_timeout(self.client)) from exc
        return node.client

    async def lost(self, key: str) -> None:
        """See :meth:`Executor.lost`."""
        with contextlib.suppress(*SERVER_AWAY), connection_errors():
            node = await self.route.node_for(key)
            await self.route.rerouted(key, node, RedisConnectionError(key))

    async def execute(self, call: Call[T], since: int | None = None) -> T:
        """Sends ``call``; its parsed reply (see :meth:`Executor.execute`)."""
        # Before anything is awaited: a stop from then on ends the wait.
        stops = self._stops if since is None else since
        if self._first:
            await self._send_first(str(call.args[0]))
        return await self._routed(call, stops)

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
                try:
                    replies = await self.execute_all(step, since)
                except Exception as exc:  # noqa: PERF203 - the plan may catch it: raised in it
                    step = plan.throw(exc)
                else:
                    step = plan.send(replies)
        except StopIteration as done:
            return cast("T", done.value)

    async def _send_first(self, prefix: str) -> None:
        """Sends the namespace's first-use call, if it is still to send. Calls made while
        it is in flight wait for its answer, and send it again themselves if it failed:
        none leaves before it is answered (it may refuse the namespace, and then nothing
        else may be sent)."""
        while (sending := self._first_sending.get(prefix)) is not None:
            await asyncio.wait([sending])  # its own caller raises its error
        first = self._first.get(prefix)
        if first is None:
            return
        sending = asyncio.ensure_future(self._routed(first, self._stops))
        self._first_sending[prefix] = sending
        try:
            await sending
            self._first.pop(prefix, None)  # on failure, kept: sent with the next call
        finally:
            del self._first_sending[prefix]

    async def _routed(self, call: Call[T], stops: int) -> T:
        """Sends ``call`` where the route says (see :meth:`Executor._routed`)."""
        key = call.keys[0]
        try:
            with connection_errors():
                node = await self.route.node_for(key)
        except SERVER_AWAY as exc:  # no node of a cluster answered
            raise unavailable(describe(self.route), exc, socket_timeout(self.client)) from exc
        asking = False
        for attempt in range(1, ROUTE_ATTEMPTS + 1):  # pragma: no branch - returns or raises
            try:
                with connection_errors():
                    if asking:
                        return await self._send_pipelined(
                            node, Pipelined(call, call.replicas, asking)
                        )
                    return await self._send_on(node, call, stops)
            except AuthenticationError:  # noqa: PERF203 - a refused password is no outage
                raise
            except SERVER_AWAY as exc:
                try:
                    step = (
                        None
                        if attempt == ROUTE_ATTEMPTS
                        else await self.route.rerouted(key, node, exc)
                    )
                except SERVER_AWAY:
                    step = None  # no node answered: the node's own error says most
                if step is None:
                    raise unavailable(
                        server_address(node.client), exc, socket_timeout(node.client)
                    ) from exc
                node, asking = step
        raise AssertionError("unreachable")  # pragma: no cover

    async def _send_on(self, node: AsyncNode, call: Call[T], stops: int) -> T:
        if call.wait is not None:
            return await self._send_after(node, call, call.wait, stops)
        if call.replicas is not None:
            return await self._send_pipelined(node, Pipelined(call, call.replicas))
        return await self._send(node, call)

    async def _send(self, node: AsyncNode, call: Call[T]) -> T:
        function = call.script.function
        keys_and_args = (*call.keys, *call.args)
        loads = 0
        try:
            while True:
                try:
                    reply = await self._fcall(node, function, len(call.keys), keys_and_args)
                    break
                except ResponseError as exc:
                    if not pipelined.function_missing(exc) or loads == pipelined.LIBRARY_LOADS:
                        raise
                    await self._load(node, call.script.library)
                    loads += 1
        except ResponseError as exc:
            raise pipelined.script_failure(exc) from None
        return call.parse(reply)

    @staticmethod
    async def _fcall(
        node: AsyncNode, function: str, numkeys: int, keys_and_args: tuple[Any, ...]
    ) -> Any:
        direct = node.direct
        if direct is not None and direct.usable():
            return await direct.command("FCALL", function, numkeys, *keys_and_args)
        return await node.client.fcall(function, numkeys, *keys_and_args)

    @staticmethod
    async def _load(node: AsyncNode, library: str) -> None:
        """Loads a script library (on the connection the calls use, when direct)."""
        direct = node.direct
        if direct is not None and direct.usable():
            await direct.command("FUNCTION", "LOAD", "REPLACE", library)
        else:
            await node.client.function_load(library, replace=True)

    async def _send_after(self, node: AsyncNode, call: Call[T], wait: Wait, stops: int) -> T:
        """Sends ``call`` after its wait (see :meth:`Executor._send_after`)."""
        pool = node.client.connection_pool
        connection = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            await connection.send_packed_command(
                connection.pack_commands(_waiting_commands(call, wait))
            )
            ids = _connection_ids(await _async_reply_or_error(connection.read_response()))
            blocked = {(node.address, i) for i in ids}
            self._blocked |= blocked
            try:
                if self._stops != stops:
                    await self._unblock(blocked)
                # Bounded here: an explicit timeout of redis-py's read would give None
                # and leave the connection with a reply still to come.
                await within(
                    _async_reply_or_error(connection.read_response(timeout=math.inf)),
                    wait.seconds + WAIT_GRACE_SECONDS,
                )
            except asyncio.TimeoutError:
                raise RedisTimeoutError("no answer to a waiting call") from None
            finally:
                self._blocked -= blocked
            reply = await _async_reply_or_error(connection.read_response())
        except BaseException:  # a reply may be left unread: not for the next call
            await connection.disconnect(nowait=True)
            raise
        finally:
            await pool.release(connection)
        if _failed_after_wait(reply):
            return await self._send(node, call)  # loads the library and sends the call now
        return call.parse(reply)

    async def stop_waits(self) -> None:
        """Ends the waits of this executor's calls in progress now (see
        :meth:`Executor.stop_waits`)."""
        self._stops += 1
        await self._unblock(set(self._blocked))

    async def _unblock(self, blocked: set[tuple[str, int]]) -> None:
        try:
            for at, client_id in blocked:
                await self.route.node(at).client.client_unblock(client_id)
        except ResponseError:
            pass

    @staticmethod
    async def _send_pipelined(node: AsyncNode, sent: Pipelined[T]) -> T:
        """Sends a call in a pipeline (see :meth:`Executor._send_pipelined`)."""
        results: list[Any] = await pipeline(node.client, sent).execute(raise_on_error=False)
        loads = 0  # as in Executor._send_pipelined
        while sent.needs_library(results) and loads < pipelined.LIBRARY_LOADS:
            sent = sent.loading()
            results = await pipeline(node.client, sent).execute(raise_on_error=False)
            loads += 1
        return sent.reply(results)

    async def ping(self) -> None:
        """Returns once every primary answers (see :meth:`Executor.ping`)."""
        with connection_errors():
            for node in await self.route.primaries():
                await node.client.ping()

    async def close(self) -> None:
        """Closes the connection pools."""
        await self.route.aclose()
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
