"""Where an executor's calls go: one server, or the node of a cluster that serves the
call's slot (:mod:`fairque.engine.cluster`).

A route gives, for a call's first key, a :class:`Node`: a plain redis-py client of one
server and its direct calls, on which the executor sends the call exactly as on a
single server. After an error of a node, a route's ``rerouted`` says where to send the
call again, if anywhere: one server has nowhere else to go, a cluster asks its nodes for
the map again.

The asyncio routes, in :mod:`fairque.engine.async_routes`, are written by hand; the
blocking ones, in :mod:`fairque.engine.blocking_routes`, are generated from them
(``tools/unasync.py``). What both share is here.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import redis
import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.exceptions import AskError, MovedError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from fairque.engine.async_direct import AsyncDirectCalls
from fairque.engine.cluster import Nodes, Topology, address, startup_addresses
from fairque.engine.connect import MAX_CONNECTIONS, POOL_WAIT, hiredis_packing, server_address
from fairque.engine.direct import DirectCalls

C = TypeVar("C")  # a node's client
D = TypeVar("D")  # its direct calls

# A cluster client's connection options that a node's client must not take: each node
# has its own address, its own retries (none), and none of the cluster client's hooks.
_CLUSTER_ONLY = {"host", "port", "retry", "redis_connect_func", "himport_registry",
                 "oss_cluster_maint_notifications_handler"}  # fmt: skip


def node_options(options: dict[str, Any], default: type[Any]) -> tuple[type[Any], dict[str, Any]]:
    """The connection class and options of a node's client, from a cluster client's
    options: only those its connection class takes (a cluster client keeps others among
    them: response callbacks, its own handlers)."""
    connection_class = options.get("connection_class") or default
    accepted: set[str] = set()
    for klass in connection_class.__mro__:
        if "__init__" in vars(klass):
            accepted |= inspect.signature(vars(klass)["__init__"]).parameters.keys()
    kept = {
        key: value for key, value in options.items() if key in accepted and key not in _CLUSTER_ONLY
    }
    return connection_class, kept


def plain_client(
    connection_class: type[Any], options: dict[str, Any], host: str, port: int
) -> redis.Redis:
    """The blocking client of a cluster's node. No retries in a node's client: a failed
    call is routed again, by the map."""
    pool = redis.ConnectionPool(
        connection_class=connection_class, host=host, port=port,
        retry=Retry(NoBackoff(), 0), **options,
    )  # fmt: skip
    return redis.Redis.from_pool(pool)  # closed with it: the pool is this node's own


def async_plain_client(
    connection_class: type[Any], options: dict[str, Any], host: str, port: int
) -> aioredis.Redis:
    """:func:`plain_client` for asyncio, its commands packed by hiredis."""
    pool = aioredis.BlockingConnectionPool(
        host=host, port=port, max_connections=MAX_CONNECTIONS, timeout=POOL_WAIT,
        connection_class=hiredis_packing(connection_class), retry=Retry(NoBackoff(), 0),
        **options,
    )  # fmt: skip
    return aioredis.Redis.from_pool(pool)


# What a failed map refresh leaves: a node that answers nothing useful is skipped.
NOT_A_MAP = (RedisConnectionError, RedisTimeoutError, ResponseError)


@dataclass(frozen=True)
class Node(Generic[C, D]):
    """A server a call can go to: its address (for errors), its plain redis-py client,
    and the client's direct calls if it is plain enough for them."""

    address: str
    client: C
    direct: D | None


SyncNode = Node[redis.Redis, DirectCalls]
AsyncNode = Node[aioredis.Redis, AsyncDirectCalls]


class ClusterState(Generic[C, D]):
    """What both cluster routes keep: the topology, and a :class:`Node` per address."""

    def __init__(self, startup: Sequence[tuple[str, int]], nodes: Nodes[Node[C, D]]) -> None:
        self.topology = Topology(startup_addresses(startup))
        self._nodes = nodes

    def node(self, at: str) -> Node[C, D]:
        """The node at an address (its client made on first use)."""
        return self._nodes.client(at)

    def known_node(self, key: str) -> Node[C, D] | None:
        """The primary serving ``key`` as the map says; None before a map is known."""
        primary = self.topology.primary_for(key)
        return None if primary is None else self.node(primary)

    def redirected(self, exc: BaseException) -> tuple[Node[C, D], bool] | None:
        """Where a MOVED or an ASK sends a call (True: ASK, send ``ASKING`` first); None
        for any other error."""
        if isinstance(exc, MovedError):
            return self.node(self.topology.moved(exc)), False
        if isinstance(exc, AskError):
            return self.node(address(exc.host, int(exc.port))), True
        return None

    def after_refresh(self, key: str, failed: Node[C, D]) -> Node[C, D] | None:
        """The node to send a call to after the map was asked again, if not ``failed``."""
        primary = self.topology.primary_for(key)
        if primary is None or primary == failed.address:
            return None
        return self.node(primary)

    def nodes(self) -> list[Node[C, D]]:
        """The nodes made so far."""
        return list(self._nodes.clients.values())

    def known_primaries(self) -> list[Node[C, D]]:
        """The primaries of the map."""
        assert self.topology.map is not None
        return [self.node(at) for at in self.topology.map.primaries()]


class OneNode(Protocol):
    """A route of one server (blocking or asyncio)."""

    @property
    def the_node(self) -> Node[Any, Any]: ...


def describe(route: ClusterState[Any, Any] | OneNode) -> str:
    """The servers of a route, for error messages: the one server, or a cluster's
    startup nodes."""
    if isinstance(route, ClusterState):
        return "cluster " + ",".join(route.topology.startup)
    return server_address(route.the_node.client)  # asked now: a Sentinel's may move
