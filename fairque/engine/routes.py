"""Where an executor's calls go: one server, or the node of a cluster that serves the
call's slot (:mod:`fairque.engine.cluster`).

A route gives, for a call's first key, a :class:`Node`: a plain redis-py client of one
server and its direct calls, on which the executor sends the call exactly as on a
single server. After an error of a node, :meth:`ClusterRoute.rerouted` says where to
send the call again, if anywhere: one server has nowhere else to go, a cluster asks its
nodes for the map again.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import redis
import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.exceptions import AskError, MovedError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from fairque.engine.async_direct import AsyncDirectCalls, async_direct_calls
from fairque.engine.cluster import (
    Nodes,
    NoNodeAnsweredError,
    Topology,
    address,
    startup_addresses,
)
from fairque.engine.connect import MAX_CONNECTIONS, POOL_WAIT, hiredis_packing, server_address
from fairque.engine.direct import DirectCalls, direct_calls

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


# What a failed map refresh leaves: a node that answers nothing useful is skipped.
_NOT_A_MAP = (RedisConnectionError, RedisTimeoutError, ResponseError)


@dataclass(frozen=True)
class Node(Generic[C, D]):
    """A server a call can go to: its address (for errors), its plain redis-py client,
    and the client's direct calls if it is plain enough for them."""

    address: str
    client: C
    direct: D | None


SyncNode = Node[redis.Redis, DirectCalls]
AsyncNode = Node[aioredis.Redis, AsyncDirectCalls]


class OneServer:
    """The route of a client of one server (or of the master a Sentinel names, which the
    client's own pool finds again after a failover): every call goes to it."""

    def __init__(self, client: redis.Redis) -> None:
        self.the_node: SyncNode = Node(server_address(client), client, direct_calls(client))

    def node_for(self, key: str) -> SyncNode:
        """The node for ``key``: always the one server."""
        return self.the_node

    def node(self, at: str) -> SyncNode:
        return self.the_node

    def rerouted(self, key: str, node: SyncNode, exc: BaseException) -> None:
        """One server has nowhere else to send a call."""

    def primaries(self) -> list[SyncNode]:
        return [self.the_node]

    def close(self) -> None:
        """Gives back the connection the direct calls kept (the client is the caller's)."""
        if self.the_node.direct is not None:
            self.the_node.direct.close()


class AsyncOneServer:
    """:class:`OneServer` with an asyncio client."""

    def __init__(self, client: aioredis.Redis) -> None:
        direct = async_direct_calls(client)
        self.the_node: AsyncNode = Node(server_address(client), client, direct)

    async def node_for(self, key: str) -> AsyncNode:
        return self.the_node

    def node(self, at: str) -> AsyncNode:
        return self.the_node

    async def rerouted(self, key: str, node: AsyncNode, exc: BaseException) -> None:
        """One server has nowhere else to send a call."""

    async def primaries(self) -> list[AsyncNode]:
        return [self.the_node]

    async def aclose(self) -> None:
        if self.the_node.direct is not None:
            await self.the_node.direct.close()


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


class ClusterRoute(ClusterState[redis.Redis, DirectCalls]):
    """Calls sent to the primary of their slot, with blocking clients."""

    @classmethod
    def of(cls, client: RedisCluster) -> ClusterRoute:
        """The route of a redis-py cluster client: its startup nodes and options."""
        manager = client.nodes_manager
        startup = [(node.host, node.port) for node in manager.startup_nodes.values()]
        connection_class, options = node_options(manager.connection_kwargs, redis.Connection)

        def make(host: str, port: int) -> SyncNode:
            # No retries in a node's client: a failed call is routed again, by the map.
            pool = redis.ConnectionPool(
                connection_class=connection_class, host=host, port=port,
                retry=Retry(NoBackoff(), 0), **options,
            )  # fmt: skip
            node_client = redis.Redis(connection_pool=pool)
            return Node(address(host, port), node_client, direct_calls(node_client))

        return cls(startup, Nodes(make))

    def node_for(self, key: str) -> SyncNode:
        """The node serving ``key``'s slot (the map asked first if none is known)."""
        node = self.known_node(key)
        if node is None:
            self.refresh(None)
            node = self.known_node(key)
            if node is None:
                raise NoNodeAnsweredError(f"no node serves the slot of {key}")
        return node

    def rerouted(
        self, key: str, node: SyncNode, exc: BaseException
    ) -> tuple[SyncNode, bool] | None:
        """Where to send a call again after ``node`` failed it with ``exc``: the node a
        MOVED or an ASK names, or the slot's primary after the map was asked again, if it
        changed; None to give up."""
        redirect = self.redirected(exc)
        if redirect is not None:
            return redirect
        self.refresh(node.address)
        again = self.after_refresh(key, node)
        return None if again is None else (again, False)

    def refresh(self, failed: str | None) -> None:
        """Asks the nodes for the map, ``failed`` last; raises if none answers."""
        for at in self.topology.ask_order(failed):
            try:
                reply = self.node(at).client.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
            except _NOT_A_MAP:  # the next node may answer
                continue
            self.topology.learn(reply, at)
            return
        raise NoNodeAnsweredError("no node of the cluster answered (asked for its slots)")

    def primaries(self) -> list[SyncNode]:
        """Every primary, as the nodes say now."""
        self.refresh(None)
        return self.known_primaries()

    def close(self) -> None:
        for node in self.nodes():
            if node.direct is not None:
                node.direct.close()
            node.client.close()


class AsyncClusterRoute(ClusterState[aioredis.Redis, AsyncDirectCalls]):
    """:class:`ClusterRoute` with asyncio clients."""

    @classmethod
    def of(cls, client: AsyncRedisCluster) -> AsyncClusterRoute:
        manager = client.nodes_manager
        startup = [(node.host, int(node.port)) for node in manager.startup_nodes.values()]
        connection_class, options = node_options(manager.connection_kwargs, aioredis.Connection)
        connection_class = hiredis_packing(connection_class)

        def make(host: str, port: int) -> AsyncNode:
            pool = aioredis.BlockingConnectionPool(
                host=host, port=port, max_connections=MAX_CONNECTIONS, timeout=POOL_WAIT,
                connection_class=connection_class, retry=Retry(NoBackoff(), 0), **options,
            )  # fmt: skip
            node_client = aioredis.Redis.from_pool(pool)
            return Node(address(host, port), node_client, async_direct_calls(node_client))

        return cls(startup, Nodes(make))

    async def node_for(self, key: str) -> AsyncNode:
        """The node serving ``key``'s slot (the map asked first if none is known)."""
        node = self.known_node(key)
        if node is None:
            await self.refresh(None)
            node = self.known_node(key)
            if node is None:
                raise NoNodeAnsweredError(f"no node serves the slot of {key}")
        return node

    async def rerouted(
        self, key: str, node: AsyncNode, exc: BaseException
    ) -> tuple[AsyncNode, bool] | None:
        """See :meth:`ClusterRoute.rerouted`."""
        redirect = self.redirected(exc)
        if redirect is not None:
            return redirect
        await self.refresh(node.address)
        again = self.after_refresh(key, node)
        return None if again is None else (again, False)

    async def refresh(self, failed: str | None) -> None:
        """Asks the nodes for the map, ``failed`` last; raises if none answers."""
        for at in self.topology.ask_order(failed):
            try:
                reply = await self.node(at).client.execute_command("CLUSTER", "SLOTS")  # type: ignore[no-untyped-call]
            except _NOT_A_MAP:  # the next node may answer
                continue
            self.topology.learn(reply, at)
            return
        raise NoNodeAnsweredError("no node of the cluster answered (asked for its slots)")

    async def primaries(self) -> list[AsyncNode]:
        """Every primary, as the nodes say now."""
        await self.refresh(None)
        return self.known_primaries()

    async def aclose(self) -> None:
        for node in self.nodes():
            if node.direct is not None:
                await node.direct.close()
            await node.client.aclose()


SyncRoute = OneServer | ClusterRoute
AsyncRoute = AsyncOneServer | AsyncClusterRoute


def route_of(client: redis.Redis | RedisCluster) -> SyncRoute:
    """The route of a blocking redis-py client: a cluster's, or its one server."""
    return ClusterRoute.of(client) if isinstance(client, RedisCluster) else OneServer(client)


def async_route_of(client: aioredis.Redis | AsyncRedisCluster) -> AsyncRoute:
    """The route of an asyncio redis-py client."""
    if isinstance(client, AsyncRedisCluster):
        return AsyncClusterRoute.of(client)
    return AsyncOneServer(client)


def describe(route: SyncRoute | AsyncRoute) -> str:
    """The servers of a route, for error messages: the one server, or a cluster's
    startup nodes."""
    if isinstance(route, OneServer | AsyncOneServer):  # asked now: a Sentinel's may move
        return server_address(route.the_node.client)
    return "cluster " + ",".join(route.topology.startup)
