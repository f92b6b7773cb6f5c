"""Executors: send :class:`~fairque.engine.calls.Call` objects over one connection pool.

Every client of every entry point sends through an executor, and clients of one server
can share one (the JQ master's queue, jobs, scheduler and UI use a single pool). A
script is called as a function (``FCALL``); when the server does not have it, its library
is loaded (on every primary of a cluster) and the call sent again. An error reply of a
fairque script becomes its own exception (:func:`fairque.errors.from_script_error`).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fairque.config import redis_url
from fairque.engine import replicated
from fairque.engine.calls import Call
from fairque.engine.connect import AsyncClient, SyncClient, async_client, sync_client
from fairque.engine.keys import Namespace
from fairque.engine.outage import connection_errors

T = TypeVar("T")


class Executor:
    """Sends calls with a blocking redis-py client (a server or a cluster)."""

    def __init__(self, client: SyncClient) -> None:
        self.client = client
        self._first: dict[str, Call[Any]] = {}  # namespace prefix -> a call to send first

    def send_first(self, prefix: str, call: Call[Any]) -> None:
        """Sends ``call`` just before the next call to the namespace of ``prefix`` (a
        client's settings, written on first use rather than when it is made)."""
        self._first[prefix] = call

    @classmethod
    def connect(cls, url: str | None = None) -> Executor:
        """An executor for ``url`` (else ``$FAIRQUE_REDIS_URL``, else the embedded Valkey)."""
        return cls(sync_client(redis_url(url)))

    def execute(self, call: Call[T]) -> T:
        """Sends ``call``; its parsed reply."""
        if self._first:
            self._send_first(str(call.args[0]))
        return self._send(call)

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
        try:
            try:
                reply = self.client.fcall(function, len(call.keys), *keys_and_args)
            except ResponseError as exc:
                if not replicated.function_missing(exc):
                    raise
                self.client.function_load(call.script.library, replace=True)
                reply = self.client.fcall(function, len(call.keys), *keys_and_args)
        except ResponseError as exc:
            raise replicated.script_failure(exc) from None
        return call.parse(reply)

    def execute_replicated(self, call: Call[T], replicas: int, timeout: float) -> T:
        """Sends ``call``, then waits until ``replicas`` replicas have it (``WAIT``)."""
        replicated.check(replicas, timeout)
        if not replicas:
            return self.execute(call)
        if self._first:
            self._send_first(str(call.args[0]))
        pipe = replicated.pipeline(self.client, call, replicas, timeout, load=False)
        results = pipe.execute(raise_on_error=False)
        if replicated.needs_library(results):
            pipe = replicated.pipeline(self.client, call, replicas, timeout, load=True)
            results = pipe.execute(raise_on_error=False)
        return replicated.replicated_reply(call, results, replicas)

    def ping(self) -> None:
        """Returns once the server answers; raises a connection error if it does not."""
        self.client.ping()

    def close(self) -> None:
        """Closes the connection pool."""
        self.client.close()


class AsyncExecutor:
    """:class:`Executor` for asyncio: sends calls with an asyncio redis-py client."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self._first: dict[str, Call[Any]] = {}  # namespace prefix -> a call to send first

    def send_first(self, prefix: str, call: Call[Any]) -> None:
        """Sends ``call`` just before the next call to the namespace of ``prefix`` (see
        :meth:`Executor.send_first`)."""
        self._first[prefix] = call

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

    async def execute(self, call: Call[T]) -> T:
        """Sends ``call``; its parsed reply."""
        if self._first:
            await self._send_first(str(call.args[0]))
        return await self._send(call)

    async def _send_first(self, prefix: str) -> None:
        first = self._first.pop(prefix, None)
        if first is not None:
            try:
                await self._send(first)
            except BaseException:
                self._first.setdefault(prefix, first)  # sent with the next call instead
                raise

    async def _send(self, call: Call[T]) -> T:
        with connection_errors():
            return await self._call_function(call)

    async def _call_function(self, call: Call[T]) -> T:
        function = call.script.function
        keys_and_args = (*call.keys, *call.args)
        try:
            try:
                reply = await self.client.fcall(function, len(call.keys), *keys_and_args)
            except ResponseError as exc:
                if not replicated.function_missing(exc):
                    raise
                await self.client.function_load(call.script.library, replace=True)
                reply = await self.client.fcall(function, len(call.keys), *keys_and_args)
        except ResponseError as exc:
            raise replicated.script_failure(exc) from None
        return call.parse(reply)

    async def execute_replicated(self, call: Call[T], replicas: int, timeout: float) -> T:
        """Sends ``call``, then waits until ``replicas`` replicas have it (``WAIT``)."""
        replicated.check(replicas, timeout)
        if not replicas:
            return await self.execute(call)
        if self._first:
            await self._send_first(str(call.args[0]))
        with connection_errors():
            if isinstance(self.client, AsyncRedisCluster):
                await self.client.initialize()  # the pipeline needs the slot's node
            pipe = replicated.pipeline(self.client, call, replicas, timeout, load=False)
            results: list[Any] = await pipe.execute(raise_on_error=False)
            if replicated.needs_library(results):
                pipe = replicated.pipeline(self.client, call, replicas, timeout, load=True)
                results = await pipe.execute(raise_on_error=False)
        return replicated.replicated_reply(call, results, replicas)

    async def ping(self) -> None:
        """Returns once the server answers; raises a connection error if it does not."""
        with connection_errors():
            await self.client.ping()

    async def close(self) -> None:
        """Closes the connection pool."""
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


C = TypeVar("C", bound="Closing")
A = TypeVar("A", bound="AsyncClosing")


class Closing:
    """``close()`` and ``with`` for a client that sends through an :class:`Executor` and
    closes it only if it opened it (``owns_executor``)."""

    executor: Executor
    owns_executor: bool

    def close(self) -> None:
        """Closes the connection pool, unless it is shared with another client."""
        if self.owns_executor:
            self.executor.close()

    def __enter__(self: C) -> C:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncClosing:
    """:class:`Closing` for asyncio clients: ``await close()`` and ``async with``."""

    executor: AsyncExecutor
    owns_executor: bool

    async def close(self) -> None:
        """Closes the connection pool, unless it is shared with another client."""
        if self.owns_executor:
            await self.executor.close()

    async def __aenter__(self: A) -> A:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
