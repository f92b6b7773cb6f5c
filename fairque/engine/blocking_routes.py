# Generated from fairque/engine/async_routes.py by tools/unasync.py: edit that file instead.
"""The routes of redis-py clients (:mod:`fairque.engine.routes`): one server, or the
primary of a cluster that serves a call's slot. The asyncio routes, in
:mod:`fairque.engine.async_routes`, are written by hand; the blocking ones, in
:mod:`fairque.engine.blocking_routes`, are generated from them (``tools/unasync.py``).
"""

from __future__ import annotations

import redis
from redis.cluster import RedisCluster

from fairque.engine.cluster import Nodes, NoNodeAnsweredError, address
from fairque.engine.connect import server_address
from fairque.engine.direct import DirectCalls, direct_calls
from fairque.engine.routes import (
    NOT_A_MAP,
    ClusterState,
    Node,
    SyncNode,
    node_options,
    plain_client,
)


class OneServer:
    """The route of a client of one server (or of the master a Sentinel names, which the
    client's own pool finds again after a failover): every call goes to it."""

    def __init__(self, client: redis.Redis) -> None:
        direct = direct_calls(client)
        self.the_node: SyncNode = Node(server_address(client), client, direct)

    def node_for(self, key: str) -> SyncNode:
        """The node for ``key``: always the one server."""
        return self.the_node

    def node(self, at: str) -> SyncNode:
        return self.the_node

    def nodes(self) -> list[SyncNode]:
        """The nodes made so far: the one server."""
        return [self.the_node]

    def rerouted(self, key: str, node: SyncNode, exc: BaseException) -> None:
        """One server has nowhere else to send a call."""

    def primaries(self) -> list[SyncNode]:
        return [self.the_node]

    def close(self) -> None:
        """Gives back the connection the direct calls kept (the client is the caller's)."""
        if self.the_node.direct is not None:
            self.the_node.direct.close()


class ClusterRoute(ClusterState[redis.Redis, DirectCalls]):
    """Calls sent to the primary of their slot."""

    @classmethod
    def of(cls, client: RedisCluster) -> ClusterRoute:
        """The route of a redis-py cluster client: its startup nodes and options."""
        manager = client.nodes_manager
        startup = [(node.host, int(node.port)) for node in manager.startup_nodes.values()]
        connection_class, options = node_options(manager.connection_kwargs, redis.Connection)

        def make(host: str, port: int) -> SyncNode:
            node_client = plain_client(connection_class, options, host, port)
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
            except NOT_A_MAP:  # the next node may answer
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


SyncRoute = OneServer | ClusterRoute


def route_of(client: redis.Redis | RedisCluster) -> SyncRoute:
    """The route of a redis-py client: a cluster's, or its one server."""
    if isinstance(client, RedisCluster):
        return ClusterRoute.of(client)
    return OneServer(client)
