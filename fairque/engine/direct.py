"""Script calls sent straight on the pooled connections of a plain blocking redis-py client.

A blocking executor's calls go through ``redis.Redis.execute_command``, whose per-command
machinery (the HIMPORT check, a closure per call, the metrics recorder's look-ups, the
packer's scan of every argument) costs ~20 us of client CPU, more than the send and the
read themselves (bench/bench_client.py). For a plain ``redis.Redis`` this module does the
same work without it: it takes a connection from the client's pool (which is thread
safe, checks the connection and reconnects it) or the one it kept from its last call
(see :class:`DirectCalls`), packs the ``FCALL`` (or the ``FUNCTION LOAD`` of a library
the server lost) with hiredis, as redis-py's own hiredis packer does, sends it and reads
the reply, retrying under the client's own retry policy (a connection error disconnects
the connection first, as redis-py does). The reply and every error are what ``fcall``
would give: an error reply raises ``ResponseError``, a lost server ``ConnectionError``
or ``TimeoutError``. The kept connection is out of the pool: other commands sent
through the same client (``queue.redis``, a waiting pop's pipeline) take another.

Anything else keeps redis-py's path: a cluster, a client holding one connection of its
own (``single_connection_client``), a custom command packer, client-side caching, RESP3
(push messages), redis-py's OpenTelemetry metrics once enabled, and a client class whose
``execute_command`` was overridden or wrapped (a tracing instrumentation's spans stay).
"""

from __future__ import annotations

import contextlib
import os
import weakref
from typing import Any

import hiredis
import redis
from redis.connection import Connection, ConnectionPool
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.utils import HIREDIS_AVAILABLE

try:
    from redis.observability.providers import get_observability_instance
except ImportError:  # a redis-py without its own metrics
    get_observability_instance = None  # type: ignore[assignment]

_PLAIN_EXECUTE = redis.Redis.execute_command  # as redis-py defines it, unless patched already


def _observed() -> bool:
    """True once redis-py's own OpenTelemetry metrics are enabled: it records them in
    ``execute_command``, which these calls then go through."""
    if get_observability_instance is None:
        return False
    return get_observability_instance().get_provider_manager() is not None


# A pool bounded to fewer connections than this has each of them go back to it after
# every call; a larger one (redis-py's default is unbounded) lends one for good.
HOLD_FROM_POOLS_OF = 100


class DirectCalls:
    """Sends ``FCALL`` on the pooled connections of ``client``, a plain ``redis.Redis``
    (see :func:`direct_calls`).

    The pool's checkout and return cost as much again as a call's send and read (its
    lock, a ``select`` to see the connection is clean, the metrics recorder's look-ups),
    so one connection is kept between calls, taken and put back with the atomic
    ``list.pop`` and ``append``: the calls of one thread need no pool at all, those of
    several take more connections from the pool and give back all but one. A connection
    is kept only after a call whose reply was read in full (anything else disconnects
    it), in the process that connected it, and goes back to the pool on :meth:`close`
    or when this object is collected."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.pool: ConnectionPool = client.connection_pool
        self.pid = os.getpid()
        self.kept: list[Connection] = []  # at most one connection, between calls
        self.holds = getattr(self.pool, "max_connections", 0) >= HOLD_FROM_POOLS_OF
        weakref.finalize(self, _give_back, self.pool, self.kept)

    def usable(self) -> bool:
        """False once something needs redis-py's path (see :func:`still_plain`)."""
        return still_plain(self.client, _PLAIN_EXECUTE)

    def command(self, *args: Any) -> Any:
        """The reply of the command ``args`` (``FCALL``, ``FUNCTION LOAD``: a command
        with no response callback in redis-py), as ``client.execute_command`` gives it."""
        try:
            packed = [hiredis.pack_command(args)]
        except TypeError:  # an argument hiredis cannot pack: redis-py's DataError says which
            return self.client.execute_command(*args)  # type: ignore[no-untyped-call]
        connection, kept = self._take()
        try:
            if not kept:
                reply = self._send_with_retry(connection, packed)
            else:
                try:
                    reply = _send_and_read(connection, packed)
                except RedisConnectionError:
                    # Closed while kept (the server's idle timeout, a restart): connected
                    # again at once, as the pool's checkout would, and sent again.
                    connection.disconnect()  # type: ignore[no-untyped-call]
                    reply = self._send_with_retry(connection, packed)
        except ResponseError:  # an error reply, read in full: the connection is fine
            self._put_back(connection)
            raise
        except BaseException:  # a reply may be left unread: not for the next call
            connection.disconnect()  # type: ignore[no-untyped-call]
            self.pool.release(connection)
            raise
        self._put_back(connection)
        return reply

    def _take(self) -> tuple[Connection, bool]:
        """A connection, and whether it is the one kept since an earlier call."""
        try:
            connection = self.kept.pop()
        except IndexError:
            return self.pool.get_connection(), False
        if self.pid != os.getpid():  # a forked child: the parent's connection stays its own
            self.kept.clear()
            self.pid = os.getpid()
            return self.pool.get_connection(), False
        return connection, True

    @staticmethod
    def _send_with_retry(connection: Connection, packed: list[bytes]) -> Any:
        """As redis-py sends a command: under the connection's retry policy, each
        failed attempt disconnecting it first. Each attempt connects with ``connect()``,
        as the pool's checkout does: a Sentinel's connection asks the sentinels where the
        primary is there (the reconnect inside ``send_packed_command`` would go back to
        the address it had, the old primary's, after a failover)."""

        def attempt() -> Any:
            connection.connect()  # type: ignore[no-untyped-call]
            return _send_and_read(connection, packed)

        return connection.retry.call_with_retry(
            attempt,
            lambda _error: connection.disconnect(),  # type: ignore[no-untyped-call]
        )

    def _put_back(self, connection: Connection) -> None:
        if self.holds and not self.kept:
            self.kept.append(connection)
        else:
            self.pool.release(connection)

    def release_unused(self) -> None:
        """:meth:`close`: a call in progress holds a connection of its own."""
        self.close()

    def close(self) -> None:
        """Gives the kept connection back to the pool."""
        _give_back(self.pool, self.kept)


def _give_back(pool: ConnectionPool, kept: list[Connection]) -> None:
    with contextlib.suppress(IndexError):  # another thread took the last one meanwhile
        while kept:
            pool.release(kept.pop())


def _send_and_read(connection: Connection, packed: list[bytes]) -> Any:
    connection.send_packed_command(packed)  # type: ignore[no-untyped-call]
    return connection.read_response()


def plain_pool(pool: Any) -> bool:
    """True if the commands of a redis-py connection pool (blocking or asyncio) can be
    packed by hiredis and their replies read as redis-py reads them: no command packer of
    its own, RESP2 (no push messages among the replies), no client-side caching."""
    options = pool.connection_kwargs
    if options.get("command_packer") is not None or options.get("protocol") in (3, "3"):
        return False
    return HIREDIS_AVAILABLE and getattr(pool, "cache", None) is None


def still_plain(client: Any, plain_execute: object) -> bool:
    """True while a redis-py client's calls may skip its ``execute_command``: it holds
    no connection of its own, redis-py's metrics are not enabled, and its class's
    ``execute_command`` is still ``plain_execute``, redis-py's own (not overridden or
    wrapped, as a tracing instrumentation does). Checked at every call: an
    instrumentation or the metrics may be set up after the client was made."""
    return (
        client.connection is None
        and type(client).execute_command is plain_execute
        and not _observed()
    )


def direct_calls(client: Any) -> DirectCalls | None:
    """A :class:`DirectCalls` for ``client`` if it is a plain blocking ``redis.Redis``
    whose calls can go straight to its connections, else None (see the module's
    docstring)."""
    if not isinstance(client, redis.Redis) or not plain_pool(client.connection_pool):
        return None
    direct = DirectCalls(client)
    return direct if direct.usable() else None
