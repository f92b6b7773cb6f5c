"""Plans over the shards of one logical queue: which shards a call goes to and how their
replies merge, written once for the fair queue (:mod:`fairque.queue.plans`) and the
strict-policy jobs (:mod:`fairque.jobs.plans`).

A plan is sans-IO. It is either one :class:`~fairque.engine.calls.Call`, or a generator
that yields steps (lists of calls, which an asyncio client sends concurrently and a
blocking one in turn), receives their parsed replies, and returns the operation's value.
A step that fails raises its error at the plan's ``yield``, where the plan may go on
without it (a pop skips a shard whose server is away).

A sharded queue is N namespaces ``<ns>:0`` .. ``<ns>:N-1``. Each shard is a namespace of
its own (keys ``fq:{<ns>:<i>}:...``), so on a cluster the shards' slots spread over the
nodes and each script still touches one slot. What decides a shard (a tenant, a job's
name) is hashed with CRC-32, the same in every process and language.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar, Union

from fairque.engine import records
from fairque.engine.calls import Call
from fairque.engine.keys import Namespace
from fairque.errors import InvalidInput

T = TypeVar("T")
Step = list[Call[Any]]
Steps = Generator[Step, list[Any], T]
# One call, or steps of calls (see the module's docstring).
Plan = Union[Call[T], Steps[T]]  # noqa: UP007 - a generic alias: `|` fails at run time on 3.10

MAX_SHARDS = 1024


def shard_namespaces(namespace: str, shards: int) -> list[str]:
    """The namespaces of a queue split in ``shards``: ``<namespace>:<i>``."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidInput("shards", f"must be 1 to {MAX_SHARDS}, not {shards!r}")
    return [f"{namespace}:{index}" for index in range(shards)]


def shard_index(key: str, shards: int) -> int:
    """The shard of ``key`` (a tenant, a job's name): CRC-32 of its UTF-8 form, modulo
    ``shards``."""
    return zlib.crc32(key.encode()) % shards


def by_shard(keys: Iterable[str], shards: int) -> dict[int, list[int]]:
    """Positions of ``keys`` grouped by shard, in order within each shard."""
    groups: dict[int, list[int]] = {}
    for position, key in enumerate(keys):
        groups.setdefault(shard_index(key, shards), []).append(position)
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


def split_cursor(cursor: int, shards: int) -> tuple[int, int]:
    """A sharded list's cursor as (shard, that shard's own cursor)."""
    inner, shard = divmod(cursor, shards)
    return shard, inner


class ShardOps(Protocol):
    """What a shard's call builder has: its namespace."""

    @property
    def namespace(self) -> Namespace: ...


class Page(Protocol):
    """A page of a list: ``cursor`` 0 when there is no more."""

    @property
    def cursor(self) -> int: ...


Ops = TypeVar("Ops", bound=ShardOps)
P = TypeVar("P", bound=Page)


class ShardPlans(Generic[Ops]):
    """The machinery of plans over the shards of one queue, each shard's calls built by
    an ``Ops``; with one namespace every plan is that namespace's call."""

    def __init__(self, shards: list[Ops]) -> None:
        self.shards = shards
        self.rotation = Rotation(len(shards))
        self.single = shards[0] if len(shards) == 1 else None

    def split(self, keys: Sequence[str]) -> list[tuple[Ops, list[int]]]:
        """Each shard's calls with the positions of its ``keys``, in order."""
        return [
            (self.shards[shard], positions)
            for shard, positions in by_shard(keys, len(self.shards)).items()
        ]

    def each(self, build: Callable[[Ops], Call[T]], merge: Callable[[list[T]], T]) -> Plan[T]:
        """The call on every shard, the replies merged."""
        if self.single is not None:
            return build(self.single)
        return merged([build(ops) for ops in self.shards], merge)

    def found(self, build: Callable[[Ops], Call[T | None]]) -> Plan[T | None]:
        """The call on every shard; the first reply that is not None."""
        if self.single is not None:
            return build(self.single)
        return merged(
            [build(ops) for ops in self.shards],
            lambda found: next((one for one in found if one is not None), None),
        )

    def holder(self, record_id: str) -> Steps[Ops]:
        """The calls of the shard that holds ``record_id`` (the first shard's if none
        does: its calls say so)."""
        if self.single is not None:
            return self.single
        found = yield [records.get(ops.namespace, record_id) for ops in self.shards]
        holders = (ops for ops, record in zip(self.shards, found, strict=True) if record)
        return next(holders, self.shards[0])

    def on_holder(self, record_id: str, build: Callable[[Ops], Call[T]]) -> Plan[T]:
        """The call on the shard that holds ``record_id``."""
        if self.single is not None:
            return build(self.single)
        return self._holder_then(record_id, build)

    def _holder_then(self, record_id: str, build: Callable[[Ops], Call[T]]) -> Steps[T]:
        ops = yield from self.holder(record_id)
        [reply] = yield [build(ops)]
        return reply  # type: ignore[no-any-return]

    def paged(
        self,
        cursor: int,
        limit: int,
        build: Callable[[Ops, int, int], Call[P]],
        join: Callable[[list[P], int], P],
        size: Callable[[P], int],
    ) -> Steps[P]:
        """A page of a list that goes through the shards in turn, its cursor carrying the
        shard (``shard's cursor * shards + shard``; 0: no more); ``join`` makes one page
        of the shards' pages with that cursor. A shard that has no more gives way to the
        next within the same page, so a page fills up to ``limit`` across shards; a shard
        with more ends the page (one shard's page may hold fewer than asked, as on one
        namespace)."""
        shards = len(self.shards)
        shard, inner = split_cursor(cursor, shards)
        pages: list[P] = []
        taken = 0
        while True:
            wanted = limit - taken if pages else limit
            page: P = (yield [build(self.shards[shard], inner, wanted)])[0]
            pages.append(page)
            taken += size(page)
            if page.cursor:  # this shard has more
                following = page.cursor * shards + shard
            elif shard + 1 == shards:
                following = 0
            elif taken >= limit:
                following = shard + 1  # the next shard, from its start
            else:
                shard, inner = shard + 1, 0
                continue
            return join(pages, following)


def merged(calls: Step, merge: Callable[[list[T]], T]) -> Steps[T]:
    """One step of ``calls``, their replies merged."""
    return merge((yield calls))
