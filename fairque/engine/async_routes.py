"""The routes of redis-py clients (:mod:`fairque.engine.routes`): one server, or the
primary of a cluster that serves a call's slot. The asyncio routes, in
:mod:`fairque.engine.async_routes`, are written by hand; the blocking ones, in
:mod:`fairque.engine.blocking_routes`, are generated from them (``tools/unasync.py``).
"""

from __future__ import annotations

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from fairque.engine.async_direct import AsyncDirectCalls, async_direct_calls
from fairque.engine.cluster import Nodes, NoNodeAnsweredError, address
from fairque.engine.connect import server_address
from fairque.engine.routes import (
    NOT_A_MAP,
    AsyncNode,
    ClusterState,
    Node,
    async_plain_client,
    node_options,
)


class AsyncOneServer:
    """The route of a client of one server (or of the master a Sentinel names, which the
    client's own pool finds again after a failover): every call goes to it."""

    def __init__(self, client: aioredis.Redis) -> None:
        direct = async_direct_calls(client)
        self.the_node: AsyncNode = Node(server_address(client), client, direct)

    async def node_for(self, key: str) -> AsyncNode:
        """The node for ``key``: always the one server."""
        return self.the_node

    def node(self, at: str) -> AsyncNode:
        return self.the_node

    def nodes(self) -> list[AsyncNode]:
        """The nodes made so far: the one server."""
        return [self.the_node]

    async def rerouted(self, key: str, node: AsyncNode, exc: BaseException) -> None:
        """One server has nowhere else to send a call."""

    async def primaries(self) -> list[AsyncNode]:
        return [self.the_node]

    async def aclose(self) -> None:
        """Gives back the connection the direct calls kept (the client is the caller's)."""
        if self.the_node.direct is not None:
            await self.the_node.direct.close()


class AsyncClusterRoute(ClusterState[aioredis.Redis, AsyncDirectCalls]):
    """Calls sent to the primary of their slot."""

    @classmethod
    def of(cls, client: AsyncRedisCluster) -> AsyncClusterRoute:
        """The route of a redis-py cluster client: its startup nodes and options."""
        manager = client.nodes_manager
        startup = [(node.host, int(node.port)) for node in manager.startup_nodes.values()]
        connection_class, options = node_options(manager.connection_kwargs, aioredis.Connection)

        def make(host: str, port: int) -> AsyncNode:
            node_client = async_plain_client(connection_class, options, host, port)
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
        """Where to send a call again after ``node`` failed it with ``exc``: the node a
        MOVED or an ASK names, or the slot's primary after the map was asked again, if it
        changed; None to give up."""
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
            except NOT_A_MAP:  # the next node may answer
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


AsyncRoute = AsyncOneServer | AsyncClusterRoute


def async_route_of(client: aioredis.Redis | AsyncRedisCluster) -> AsyncRoute:
    """The route of a redis-py client: a cluster's, or its one server."""
    if isinstance(client, AsyncRedisCluster):
        return AsyncClusterRoute.of(client)
    return AsyncOneServer(client)
