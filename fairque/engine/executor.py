# Generated from fairque/engine/async_executor.py by tools/unasync.py: edit that file instead.
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

The asyncio executor, in :mod:`fairque.engine.async_executor`, is written by hand; the
blocking one, in :mod:`fairque.engine.executor`, is generated from it
(``tools/unasync.py``), with the steps whose two forms differ in more than ``await``
taken from :mod:`fairque.engine.sending`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import redis
from redis.exceptions import AuthenticationError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError

from fairque.closing import Closeable
from fairque.config import redis_url
from fairque.engine import pipelined
from fairque.engine.blocking_routes import route_of
from fairque.engine.calls import Call, Wait
from fairque.engine.cluster import ROUTE_ATTEMPTS
from fairque.engine.connect import SyncClient, server_address, socket_timeout
from fairque.engine.keys import Namespace
from fairque.engine.outage import SERVER_AWAY
from fairque.engine.pipelined import Pipelined, pipeline
from fairque.engine.routes import SyncNode, describe
from fairque.engine.sending import (
    WAIT_GRACE_SECONDS,
    Lock,
    borrowed,
    connection_ids,
    ended_after,
    executor_client,
    failed_after_wait,
    gather,
    read_reply,
    stray_errors,
    unavailable,
    waiting_commands,
)

if TYPE_CHECKING:
    from fairque.engine.shards import Plan

T = TypeVar("T")


class Executor:
    """Sends calls through a redis-py client (a server or a cluster)."""

    def __init__(self, client: SyncClient) -> None:
        self.client = client
        self.route = route_of(client)
        self._first: dict[str, Call[Any]] = {}  # namespace prefix -> a call to send first
        self._first_lock = Lock()  # other calls wait for a first use in flight
        # The connections waiting for a signal: (their node's address, their id).
        self._blocked: set[tuple[str, int]] = set()
        self._stops = 0  # calls of stop_waits: a wait that saw one come ends itself
        # Per node address: whether this client may end waits itself (CLIENT ID and
        # UNBLOCK), asked before its first wait there (see waiting_commands).
        self._ends_waits: dict[str, bool] = {}

    @classmethod
    def connect(cls, url: str | None = None) -> Executor:
        """An executor for ``url`` (else ``$FAIRQUE_REDIS_URL``, else the embedded Valkey)."""
        return cls(executor_client(redis_url(url)))

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

    def client_for(self, key: str) -> redis.Redis:
        """The plain client of the server that holds ``key``: the one server, or the
        cluster's primary for its slot (for a subscription to a sharded channel)."""
        try:
            with stray_errors():
                node = self.route.node_for(key)
        except SERVER_AWAY as exc:
            raise unavailable(describe(self.route), exc, socket_timeout(self.client)) from exc
        return node.client

    def lost(self, key: str) -> None:
        """A connection to ``key``'s server failed outside a call (a subscription's): on
        a cluster, the nodes are asked for the map again, so that the next
        :meth:`client_for` names the slot's primary now."""
        with contextlib.suppress(*SERVER_AWAY), stray_errors():
            node = self.route.node_for(key)
            self.route.rerouted(key, node, RedisConnectionError(key))

    def execute(self, call: Call[T], since: int | None = None) -> T:
        """Sends ``call``; its parsed reply. A server that does not answer raises
        :class:`~fairque.errors.ServerUnavailable` (or ``ServerTimeout``) naming it. A
        wait ends at once if :meth:`stop_waits` was called since ``stop_count`` was
        ``since``."""
        # Noted first: a stop from then on ends the wait.
        stops = self._stops if since is None else since
        if self._first:
            self._send_first(str(call.args[0]))
        return self._routed(call, stops)

    def execute_all(self, calls: Sequence[Call[Any]], since: int | None = None) -> list[Any]:
        """Sends ``calls`` (all at once on asyncio, in turn on a blocking client); their
        parsed replies in order."""
        return gather([self.execute(call, since) for call in calls])

    def run(self, plan: Plan[T]) -> T:
        """Sends a plan's calls (:mod:`fairque.engine.shards`), step by step, the calls of
        a step with :meth:`execute_all`; the operation's value. A step's error is raised
        inside the plan, where the yield of that step is: a plan may go on without a
        shard that is away."""
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
        """Sends the namespace's first-use call, if it is still to send. Calls made while
        it is in flight wait for its answer, and send it again themselves if it failed:
        none leaves before it is answered (it may refuse the namespace, and then nothing
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
            with stray_errors():
                node = self.route.node_for(key)
        except SERVER_AWAY as exc:  # no node of a cluster answered
            raise unavailable(describe(self.route), exc, socket_timeout(self.client)) from exc
        asking = False
        for attempt in range(1, ROUTE_ATTEMPTS + 1):  # pragma: no branch - returns or raises
            try:
                with stray_errors():
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
        the server had the wait, could not end it, so the wait ends itself. Where the
        client may end waits, the wait has no timeout on the server: the client ends it
        when its time is up."""
        ends_waits = self._may_end_waits(node)
        with borrowed(node.client.connection_pool) as connection:
            connection.send_packed_command(
                connection.pack_commands(waiting_commands(call, wait, ends_waits))
            )
            ids = connection_ids(read_reply(connection))
            blocked = {(node.address, i) for i in ids}
            self._blocked |= blocked
            try:
                if self._stops != stops:
                    self._unblock(blocked)
                if ends_waits:
                    with ended_after(wait.seconds, lambda: self._unblock(blocked)):
                        read_reply(connection, wait.seconds + WAIT_GRACE_SECONDS)
                else:
                    read_reply(connection, wait.seconds + WAIT_GRACE_SECONDS)
            finally:
                self._blocked -= blocked
            reply = read_reply(connection)
        if failed_after_wait(reply):
            return self._send(node, call)  # loads the library and sends the call now
        return call.parse(reply)

    def _may_end_waits(self, node: SyncNode) -> bool:
        """Whether this client may end its waits on ``node`` (``CLIENT ID`` and ``CLIENT
        UNBLOCK``; an ACL may refuse them), asked once."""
        known = self._ends_waits.get(node.address)
        if known is None:
            try:
                node.client.client_id()
                node.client.client_unblock(0)  # no such client: refused or 0
                known = True
            except ResponseError:
                known = False
            self._ends_waits[node.address] = known
        return known

    def stop_waits(self) -> None:
        """Ends the waits of this executor's calls in progress now (``CLIENT UNBLOCK``):
        each call is sent at once. A server that refuses (an ACL without ``CLIENT``) lets
        them run to their end."""
        self._stops += 1
        self._unblock(set(self._blocked))

    def _unblock(self, blocked: set[tuple[str, int]]) -> None:
        """Ends the waits of ``blocked`` (their node's address, their connection's id), on
        the node's direct connection where there is one (the pool's is waiting). A wait
        that could not be ended this way ends by its reply's read timeout."""
        with contextlib.suppress(ResponseError, *SERVER_AWAY):
            for at, client_id in blocked:
                node = self.route.node(at)
                direct = node.direct
                if direct is not None and direct.usable():
                    direct.command("CLIENT", "UNBLOCK", client_id)
                else:
                    node.client.client_unblock(client_id)

    def close_idle_connections(self) -> None:
        """Closes the pooled connections no call holds now (they open again when a call
        needs one): the server pays for each open connection every second (Valkey's
        per-client cron, ~3.4k instructions), so an idle worker keeps only its wait's.
        Connections that calls or waits hold are kept."""
        for node in self.route.nodes():
            if node.direct is not None:
                node.direct.release_unused()
            node.client.connection_pool.disconnect(inuse_connections=False)

    @staticmethod
    def _send_pipelined(node: SyncNode, sent: Pipelined[T]) -> T:
        """Sends a call in a pipeline (after ``ASKING``, or followed by ``WAIT``)."""
        results: list[Any] = pipeline(node.client, sent).execute(raise_on_error=False)
        loads = 0  # the load and the call in one pipeline; again if the function went meanwhile
        while sent.needs_library(results) and loads < pipelined.LIBRARY_LOADS:
            sent = sent.loading()
            results = pipeline(node.client, sent).execute(raise_on_error=False)
            loads += 1
        return sent.reply(results)

    def ping(self) -> None:
        """Returns once every primary answers (the one server, or each primary of a
        cluster's map); raises a connection error if one does not."""
        with stray_errors():
            for node in self.route.primaries():
                node.client.ping()

    def close(self) -> None:
        """Closes the connection pools."""
        self.route.close()
        self.client.close()


class Bound(Protocol):
    """A client bound to one namespace, sending through an :class:`Executor`:
    another entry point's client may be built on it, sharing its connection pool."""

    @property
    def executor(self) -> Executor: ...

    @property
    def namespace(self) -> Namespace: ...


class Closing(Closeable):
    """``close()`` and ``with`` for a client that sends through an
    :class:`Executor` and closes it only if it opened it (``owns_executor``)."""

    executor: Executor
    owns_executor: bool

    def close(self) -> None:
        """Closes the connection pool, unless it is shared with another client."""
        if self.owns_executor:
            self.executor.close()
