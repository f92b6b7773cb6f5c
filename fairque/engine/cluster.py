"""Calls routed by hash slot on a Redis / Valkey Cluster (design section 11).

fairque knows each call's keys, so it knows the call's hash slot, and sends the call to
the primary that serves that slot, on a plain client of that node: the same path, direct
calls, waiting pipelines and ``WAIT`` on the connection that ran the write, as on one
server. Which primary serves which slot is asked of the nodes (``CLUSTER SLOTS``) when
first needed, and again after an error that says the map is wrong: a connection error or
timeout (the node died), ``READONLY`` (it was demoted), ``CLUSTERDOWN`` or ``TRYAGAIN``
(a failover or a resharding in progress), ``MOVED`` (the slot moved). The node that failed
is asked last, so a dead master's promoted replica is found as soon as any node knows of
it. No call depends on a fixed node: redis-py's cluster client asks its default node
(``COMMAND GETKEYS``) where an ``FCALL`` goes, and while that node is down no call is
routed and its map is never refreshed (fairque issue 47).

:class:`Topology` holds the map and decides, without I/O, where a call goes and which
nodes to ask for the map; the routes of :mod:`fairque.engine.routes` ask them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from redis.crc import key_slot
from redis.exceptions import AskError
from redis.exceptions import ConnectionError as RedisConnectionError

C = TypeVar("C")  # a node's client: blocking or asyncio

# How many times one call is sent again after an error that moved it to another node (a
# MOVED, a failover found by a map refresh): more means the map keeps changing under it.
ROUTE_ATTEMPTS = 5


def slot_of(key: str | bytes) -> int:
    """The hash slot of ``key`` (its ``{...}`` tag's, if it has one)."""
    return key_slot(key.encode() if isinstance(key, str) else key)


def address(host: str, port: int) -> str:
    """``host:port``, an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def host_port(node: str) -> tuple[str, int]:
    """The host and port of an ``address``."""
    host, _, port = node.rpartition(":")
    return host.strip("[]"), int(port)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class SlotMap:
    """Which primary serves which slot, as one node said (``CLUSTER SLOTS``)."""

    ranges: tuple[tuple[int, int, str], ...]  # first slot, last slot, primary's address
    nodes: tuple[str, ...]  # every node named, primaries first

    @classmethod
    def parse(cls, reply: Sequence[Any], asked: str) -> SlotMap:
        """The map in a ``CLUSTER SLOTS`` reply given by the node at ``asked`` (a node
        named with no host is that node's host)."""
        asked_host = host_port(asked)[0]
        ranges = []
        primaries: list[str] = []
        replicas: list[str] = []
        for first, last, primary, *others in reply:
            for n, (host, port, *_) in enumerate((primary, *others)):
                node = address(_text(host) or asked_host, int(port))
                if n == 0:
                    ranges.append((int(first), int(last), node))
                group = primaries if n == 0 else replicas
                if node not in group:
                    group.append(node)
        ranges.sort()
        return cls(tuple(ranges), tuple(dict.fromkeys(primaries + replicas)))

    def primary(self, slot: int) -> str | None:
        """The address of the primary serving ``slot``; None if no node serves it."""
        for first, last, node in self.ranges:
            if first <= slot <= last:
                return node
        return None

    def primaries(self) -> list[str]:
        """Every primary that serves slots."""
        return list(dict.fromkeys(node for _, _, node in self.ranges))

    def moved(self, slot: int, node: str) -> SlotMap:
        """This map with ``slot`` served by ``node`` (what a MOVED said)."""
        ranges = []
        for first, last, primary in self.ranges:
            if first <= slot <= last and primary != node:
                ranges += [
                    (first, slot - 1, primary),
                    (slot, slot, node),
                    (slot + 1, last, primary),
                ]
            else:
                ranges.append((first, last, primary))
        kept = tuple(r for r in ranges if r[0] <= r[1])
        return SlotMap(kept, tuple(dict.fromkeys((*self.nodes, node))))


@dataclass
class Topology:
    """The cluster as this client knows it: the startup nodes, the map once asked, and
    what an error of a node means. No I/O."""

    startup: tuple[str, ...]
    map: SlotMap | None = None

    def primary_for(self, key: str) -> str | None:
        """The primary that serves ``key``'s slot, as far as known (None: ask first)."""
        if self.map is None:
            return None
        return self.map.primary(slot_of(key))

    def ask_order(self, failed: str | None) -> list[str]:
        """The nodes to ask for the map: those the last map named, then the startup
        nodes, in a random order so that clients spread their questions, ``failed`` last."""
        known = list(self.map.nodes) if self.map is not None else []
        random.shuffle(known)
        startup = list(self.startup)
        random.shuffle(startup)
        order = list(dict.fromkeys(known + startup))
        if failed in order:
            order.remove(failed)
            order.append(failed)
        return order

    def learn(self, reply: Sequence[Any], asked: str) -> None:
        """Takes the map a node gave."""
        self.map = SlotMap.parse(reply, asked)

    def moved(self, exc: AskError) -> str:
        """Takes what a MOVED said; the node it named."""
        node = address(exc.host, int(exc.port))
        if self.map is not None:
            self.map = self.map.moved(int(exc.slot_id), node)
        return node


class NoNodeAnsweredError(RedisConnectionError):
    """No node of the cluster gave its map: every one asked was unreachable."""


@dataclass
class Nodes(Generic[C]):
    """The clients of a cluster's nodes, made on first use, one per address."""

    make: Callable[[str, int], C]  # a client of the node at host, port
    clients: dict[str, C] = field(default_factory=dict)

    def client(self, node: str) -> C:
        found = self.clients.get(node)
        if found is None:
            found = self.clients[node] = self.make(*host_port(node))
        return found


def startup_addresses(nodes: Iterable[tuple[str, int]]) -> tuple[str, ...]:
    """The ``address`` of each (host, port)."""
    return tuple(dict.fromkeys(address(host, int(port)) for host, port in nodes))
