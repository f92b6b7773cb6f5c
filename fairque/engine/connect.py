"""Connections from a URL: one server, or a Redis / Valkey Cluster (design section 11).

A cluster URL names one or more startup nodes; the client discovers the rest::

    redis+cluster://[user:password@]host:port[,host:port...][?option=value...]
    rediss+cluster://...   (TLS)

A ``redis+sentinel://`` URL names the sentinels of a service (:mod:`fairque.engine.sentinel`).
Any other URL (``redis://``, ``rediss://``, ``unix://``) is one server. A cluster's
client is the user's view of it (``queue.redis``); the executors send their calls to the
node of each call's slot themselves (:mod:`fairque.engine.routes`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import hiredis
import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.asyncio.sentinel import SentinelManagedConnection, SentinelManagedSSLConnection
from redis.cluster import ClusterNode, RedisCluster
from redis.exceptions import DataError

from fairque.engine import sentinel
from fairque.errors import InvalidInput

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
SCHEMES = ("redis", "rediss", "unix", *CLUSTER_SCHEMES, *sentinel.SENTINEL_SCHEMES)

SyncClient = redis.Redis | RedisCluster
AsyncClient = aioredis.Redis | AsyncRedisCluster


def is_cluster_url(url: str) -> bool:
    """True if ``url`` names a cluster (``redis+cluster://`` or ``rediss+cluster://``)."""
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def cluster_nodes(url: str) -> tuple[str, list[tuple[str, int]]]:
    """Splits a cluster URL into a redis-py URL of its first node and the other nodes."""
    parts = urlsplit(url)
    credentials, _, hosts = parts.netloc.rpartition("@")
    nodes = [_host_port(node) for node in hosts.split(",")]
    first_host, first_port = nodes[0]
    host = f"[{first_host}]" if ":" in first_host else first_host  # IPv6
    netloc = f"{credentials}@{host}:{first_port}" if credentials else f"{host}:{first_port}"
    first = urlunsplit((CLUSTER_SCHEMES[parts.scheme], netloc, parts.path, parts.query, ""))
    return first, nodes[1:]


def _host_port(node: str) -> tuple[str, int]:
    host, _, port = node.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInput("url", f"cluster node {node!r} must be host:port")
    return host.strip("[]"), int(port)


def check_url(url: str, also: tuple[str, ...] = ()) -> str:
    """Refuses a URL of an unknown scheme, naming the ones that work, Redis's and those
    ``also`` given (and not the URL, which may hold a password)."""
    if sentinel.is_sentinel_url(url):
        sentinel.check_sentinel_url(url)  # refuses a bad one, saying what is wrong
        return url
    scheme = urlsplit(url).scheme
    if scheme not in SCHEMES and scheme not in also:
        given = f"it starts with {scheme}://" if scheme else "it has no scheme"
        known = ", ".join(f"{name}://" for name in (*also, *SCHEMES))
        raise InvalidInput("url", f"must start with one of {known} ({given})")
    return url


# Timeouts of a client made from a URL, where the URL does not set them
# (``?socket_timeout=60&socket_connect_timeout=5``). redis-py's 5 s for both would fail a
# large batch's script on a busy server; a connection not made in 10 s will not be.
# Waiting calls (``pop(wait=...)``) are bounded by their own wait instead.
SOCKET_TIMEOUT = 30.0
CONNECT_TIMEOUT = 10.0


def _with_timeouts(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with fairque's timeouts where they name none (the URL's win), and
    nothing sent when a connection is made but what it needs (AUTH, SELECT): no
    ``CLIENT SETINFO`` (redis-py sends two, ~10k server instructions) and no ``HELLO 3``
    (redis-py 8's default protocol, ~5k: fairque reads RESP2 replies; ``?protocol=3`` in
    the URL still asks for RESP3). An idle worker makes a connection at each wait's end,
    and a web process pushing through a new client one a request."""
    return {"socket_timeout": SOCKET_TIMEOUT, "socket_connect_timeout": CONNECT_TIMEOUT,
            "driver_info": None, "protocol": 2, **options}  # fmt: skip


def socket_timeout(client: Any) -> float | None:
    """The ``socket_timeout`` a redis-py client (blocking or asyncio) was made with."""
    pool = getattr(client, "connection_pool", None)
    nodes = getattr(client, "nodes_manager", client)  # a blocking cluster's options
    options = pool.connection_kwargs if pool is not None else nodes.connection_kwargs
    seconds = options.get("socket_timeout")
    return None if seconds is None else float(seconds)


def sync_client(url: str, **options: Any) -> SyncClient:
    """A blocking client for ``url``: a :class:`RedisCluster` for a cluster URL."""
    check_url(url)
    options = _with_timeouts(options)
    if sentinel.is_sentinel_url(url):
        return sentinel.sync_client(url, **options)
    if not is_cluster_url(url):
        return redis.Redis.from_url(url, **options)
    first, others = cluster_nodes(url)
    nodes = [ClusterNode(host, port) for host, port in others]  # type: ignore[no-untyped-call]
    return RedisCluster.from_url(first, startup_nodes=nodes, **options)


# redis-py's asyncio pool refuses a command beyond its connections (MaxConnectionsError,
# a ConnectionError): a burst of concurrent calls, such as a master's requests and job
# deliveries, would fail as if the server were away. A blocking pool makes them wait.
MAX_CONNECTIONS = 100  # per asyncio client of one server
POOL_WAIT = 30.0  # seconds a call waits for a free connection before it fails


class HiredisPacking:
    """Commands packed by hiredis, in C, as redis-py's blocking connections pack them: its
    asyncio connections pack in Python, which for a script call with its ~20 keys costs
    ~9x as much (bench_push.py: 47 us against 5 us on a slow VM)."""

    def pack_command(self, *args: Any) -> list[bytes]:
        name = args[0]
        space = " " if isinstance(name, str) else b" "
        if space in name:  # a command of two words in one argument, e.g. "CLIENT ID"
            args = (*name.split(), *args[1:])
        try:
            return [hiredis.pack_command(args)]
        except TypeError:
            # A bytearray, which hiredis refuses where it takes bytes and memoryviews:
            # converted here only, since looking at every argument of every call cost
            # more than packing them (~10 us for a script call on a slow VM).
            parts = tuple(bytes(a) if isinstance(a, bytearray) else a for a in args)
        try:
            # hiredis's stub declares a tuple of one item; it takes any number.
            return [hiredis.pack_command(parts)]  # type: ignore[arg-type]
        except TypeError as exc:  # what redis-py's own packing raises for such an argument
            raise DataError(str(exc)) from None


class _Connection(HiredisPacking, aioredis.Connection):
    pass


class _SSLConnection(HiredisPacking, aioredis.SSLConnection):
    pass


class _UnixDomainSocketConnection(HiredisPacking, aioredis.UnixDomainSocketConnection):
    pass


class _SentinelManagedConnection(HiredisPacking, SentinelManagedConnection):
    pass


class _SentinelManagedSSLConnection(HiredisPacking, SentinelManagedSSLConnection):
    pass


_HIREDIS_PACKING = {
    aioredis.Connection: _Connection,
    aioredis.SSLConnection: _SSLConnection,
    aioredis.UnixDomainSocketConnection: _UnixDomainSocketConnection,
    SentinelManagedConnection: _SentinelManagedConnection,
    SentinelManagedSSLConnection: _SentinelManagedSSLConnection,
}


def hiredis_packing(connection_class: type[Any]) -> type[Any]:
    """The twin of an asyncio connection class that packs commands with hiredis (the
    class itself if it has none: one of the caller's own)."""
    return _HIREDIS_PACKING.get(connection_class, connection_class)


def async_client(url: str, **options: Any) -> AsyncClient:
    """An asyncio client for ``url``: an asyncio :class:`RedisCluster` for a cluster URL."""
    check_url(url)
    options = _with_timeouts(options)
    if sentinel.is_sentinel_url(url):
        return sentinel.async_client(
            url, _HIREDIS_PACKING, max_connections=MAX_CONNECTIONS, timeout=POOL_WAIT, **options
        )
    if not is_cluster_url(url):
        pool = aioredis.BlockingConnectionPool.from_url(
            url, max_connections=MAX_CONNECTIONS, timeout=POOL_WAIT, **options
        )
        # The class from_url chose for the URL's scheme, packing with hiredis.
        pool.connection_class = hiredis_packing(pool.connection_class)
        return aioredis.Redis.from_pool(pool)
    first, others = cluster_nodes(url)
    nodes = [AsyncClusterNode(host, port) for host, port in others]
    return AsyncRedisCluster.from_url(first, startup_nodes=nodes, **options)


def server_address(client: Any) -> str:
    """``host:port`` of the server a redis-py client (blocking or asyncio) connects to,
    a cluster's startup nodes, a sentinel service, or a socket path: for error messages."""
    pool = getattr(client, "connection_pool", None)
    if sentinel.is_sentinel_pool(pool):
        return sentinel.sentinel_address(pool)
    if pool is not None:
        options = pool.connection_kwargs
        if "path" in options:
            return str(options["path"])
        return f"{options.get('host', 'localhost')}:{options.get('port', 6379)}"
    nodes = getattr(getattr(client, "nodes_manager", None), "startup_nodes", None) or {}
    return ",".join(nodes) or "(unknown)"
