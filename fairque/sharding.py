"""One logical queue over N namespaces ``<ns>:0`` .. ``<ns>:N-1`` (design section 3).

Each shard is a namespace of its own (keys ``fq:{<ns>:<i>}:...``), so on a cluster the
shards' slots spread over the nodes and each script still touches one slot. A tenant
lives on one shard, chosen by a stable hash of its name (CRC-32, the same in every
process and language), so its order and its dependencies stay within one namespace.

This module is sans-IO: it says which shard a request goes to and how replies combine;
:class:`fairque.ShardedQueue` and :class:`fairque.AsyncShardedQueue` send the calls.
"""

from __future__ import annotations

import dataclasses
import itertools
import zlib
from collections.abc import Iterable, Sequence

from fairque.errors import InvalidInput
from fairque.models import QueueStats, TaskState, TenantStats
from fairque.ops import Maintenance

MAX_SHARDS = 1024


def shard_namespaces(namespace: str, shards: int) -> list[str]:
    """The namespaces of a queue split in ``shards``: ``<namespace>:<i>``."""
    if not 1 <= shards <= MAX_SHARDS:
        raise InvalidInput("shards", f"must be 1 to {MAX_SHARDS}, not {shards!r}")
    return [f"{namespace}:{index}" for index in range(shards)]


def shard_index(tenant: str, shards: int) -> int:
    """The shard of ``tenant``: CRC-32 of its UTF-8 name, modulo ``shards``."""
    return zlib.crc32(tenant.encode()) % shards


def by_shard(tenants: Iterable[str], shards: int) -> dict[int, list[int]]:
    """Positions of ``tenants`` grouped by shard, in order within each shard."""
    groups: dict[int, list[int]] = {}
    for position, tenant in enumerate(tenants):
        groups.setdefault(shard_index(tenant, shards), []).append(position)
    return groups


class Rotation:
    """The order shards are asked for work: each pop starts one shard further, so every
    shard is asked first once every N pops and none is starved by a busy one. A pop
    takes what it can from the first shard and asks the next ones only for what is
    missing: one round trip while the first shard has enough."""

    def __init__(self, shards: int) -> None:
        self._starts = itertools.cycle(range(shards))
        self.shards = shards

    def next_order(self) -> list[int]:
        start = next(self._starts)
        return [(start + step) % self.shards for step in range(self.shards)]


def in_order(parts: dict[int, list[str]], groups: dict[int, list[int]], size: int) -> list[str]:
    """Per-shard replies (ids) put back in the order of the request they came from."""
    ordered = [""] * size
    for shard, positions in groups.items():
        for position, value in zip(positions, parts[shard], strict=True):
            ordered[position] = value
    return ordered


def merge_stats(parts: Sequence[QueueStats]) -> QueueStats:
    """The stats of all shards summed (a tenant's figures add up if it moved shards)."""
    states: dict[TaskState, int] = {}
    counters: dict[str, int] = {}
    tenants: dict[str, TenantStats] = {}
    for part in parts:
        for state, count in part.states.items():
            states[state] = states.get(state, 0) + count
        for name, value in part.counters.items():
            counters[name] = counters.get(name, 0) + value
        for tenant, figures in part.tenants.items():
            tenants[tenant] = _add(tenants[tenant], figures) if tenant in tenants else figures
    return QueueStats(
        states=states,
        counters=counters,
        tenants=dict(sorted(tenants.items())),
    )


def _add(left: TenantStats, right: TenantStats) -> TenantStats:
    return TenantStats(**{
        field.name: getattr(left, field.name) + getattr(right, field.name)
        for field in dataclasses.fields(TenantStats)
    })  # fmt: skip


def merge_maintenance(parts: Sequence[Maintenance]) -> Maintenance:
    """What maintenance did on all shards."""
    return Maintenance(**{
        field.name: sum(getattr(part, field.name) for part in parts)
        for field in dataclasses.fields(Maintenance)
    })  # fmt: skip


def soonest(dues: Iterable[float | None]) -> float | None:
    """The earliest of the shards' next-due delays; None if no shard has anything due."""
    return min((due for due in dues if due is not None), default=None)
