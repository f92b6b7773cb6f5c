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
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, Union

from fairque.engine import records
from fairque.engine.calls import Call
from fairque.engine.keys import Namespace
from fairque.errors import InvalidInput

T = TypeVar("T")
Item = TypeVar("Item")  # an item of a batch
R = TypeVar("R")  # an entry of a reply, one per item
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


PageT = TypeVar("PageT", bound="Page")


class Page(Protocol):
    """A page of a list: ``cursor`` 0 when there is no more; a sharded list joins the
    shards' pages into one (:meth:`ShardPlans.paged`)."""

    @property
    def cursor(self) -> int: ...

    def size(self) -> int:
        """How many entries the page holds."""
        ...

    @classmethod
    def joined(cls: type[PageT], pages: Sequence[PageT], cursor: int) -> PageT:
        """One page of ``pages``' entries, in order, with ``cursor``."""
        ...


S = TypeVar("S")  # what a shard's calls are built from: its Namespace, or an ops object
P = TypeVar("P", bound=Page)
A = ParamSpec("A")


class ShardPlans(Generic[S]):
    """Where an operation runs over the shards of one queue, each a policy an operation
    names with its call builder and arguments (``plans.on_holder(task_id, cancel,
    task_id)``): on every shard with the replies merged (:meth:`each`), on the first
    shard (:meth:`first`), on the shard that holds a record (:meth:`on_holder`), the
    first reply found (:meth:`found`), one page through the shards in turn
    (:meth:`paged`), or a batch split by its items' shards (:meth:`scattered`). A
    builder takes the shard (``shards[i]``) first. With one namespace every policy is
    that namespace's own call."""

    def __init__(self, shards: list[S], namespaces: list[Namespace]) -> None:
        self.shards = shards
        self.namespaces = namespaces  # shards[i]'s namespace
        self.rotation = Rotation(len(shards))
        self.single = shards[0] if len(shards) == 1 else None

    def split(self, keys: Sequence[str]) -> list[tuple[S, list[int]]]:
        """Each shard with the positions of its ``keys``, in order."""
        return [
            (self.shards[shard], positions)
            for shard, positions in by_shard(keys, len(self.shards)).items()
        ]

    def each(
        self,
        merge: Callable[[list[T]], T],
        build: Callable[Concatenate[S, A], Call[T]],
        *args: A.args,
        **kwargs: A.kwargs,
    ) -> Plan[T]:
        """The call on every shard, the replies merged."""
        if self.single is not None:
            return build(self.single, *args, **kwargs)
        return merged([build(shard, *args, **kwargs) for shard in self.shards], merge)

    def first(
        self, build: Callable[Concatenate[S, A], Call[T]], *args: A.args, **kwargs: A.kwargs
    ) -> Call[T]:
        """The call on the first shard (for what every shard holds the same of)."""
        return build(self.shards[0], *args, **kwargs)

    def found(
        self,
        build: Callable[Concatenate[S, A], Call[T | None]],
        *args: A.args,
        **kwargs: A.kwargs,
    ) -> Plan[T | None]:
        """The call on every shard; the first reply that is not None."""
        if self.single is not None:
            return build(self.single, *args, **kwargs)
        return merged([build(shard, *args, **kwargs) for shard in self.shards], first_found)

    def holder(self, record_id: str) -> Steps[S]:
        """The shard that holds ``record_id`` (the first shard if none does: its calls say
        so)."""
        if self.single is not None:
            return self.single
        found = yield [records.get(namespace, record_id) for namespace in self.namespaces]
        holders = (shard for shard, record in zip(self.shards, found, strict=True) if record)
        return next(holders, self.shards[0])

    def on_holder(
        self,
        record_id: str,
        build: Callable[Concatenate[S, A], Call[T]],
        *args: A.args,
        **kwargs: A.kwargs,
    ) -> Plan[T]:
        """The call on the shard that holds ``record_id``."""
        if self.single is not None:
            return build(self.single, *args, **kwargs)
        return self._holder_then(record_id, build, args, kwargs)

    def _holder_then(
        self,
        record_id: str,
        build: Callable[..., Call[T]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Steps[T]:
        shard = yield from self.holder(record_id)
        [reply] = yield [build(shard, *args, **kwargs)]
        return reply  # type: ignore[no-any-return]

    def scattered(
        self,
        key: Callable[[Item], str],
        items: Sequence[Item],
        build: Callable[Concatenate[S, list[Item], A], Call[list[R]]],
        *args: A.args,
        **kwargs: A.kwargs,
    ) -> Plan[list[R]]:
        """``items`` split by the shards of their ``key`` (a tenant, a job's name), one
        call per shard given its items in order; each reply holds one entry per item, put
        back in the order of ``items``."""
        if self.single is not None:
            return build(self.single, list(items), *args, **kwargs)
        return self._scatter([key(item) for item in items], items, build, args, kwargs)

    def _scatter(
        self,
        keys: Sequence[str],
        items: Sequence[Item],
        build: Callable[..., Call[list[R]]],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Steps[list[R]]:
        groups = self.split(keys)
        parts = yield [
            build(shard, [items[i] for i in positions], *args, **kwargs)
            for shard, positions in groups
        ]
        gathered: list[Any] = [None] * len(items)
        for (_, positions), part in zip(groups, parts, strict=True):
            for position, entry in zip(positions, part, strict=True):
                gathered[position] = entry
        return gathered

    def paged(
        self,
        page: type[P],
        cursor: int,
        limit: int,
        build: Callable[..., Call[P]],
        *args: Any,
        **kwargs: Any,
    ) -> Plan[P]:
        """A page of a list that goes through the shards in turn, its cursor carrying the
        shard (``shard's cursor * shards + shard``; 0: no more). ``build`` takes the shard,
        ``args``, then a shard's cursor and how many it may return, then ``kwargs``. A
        shard that has no more gives way to the next within the same page, so a page
        fills up to ``limit`` across shards; a shard with more ends the page (one shard's
        page may hold fewer than asked, as on one namespace)."""
        if self.single is not None:
            return build(self.single, *args, cursor, limit, **kwargs)
        return self._paged(page, cursor, limit, build, *args, **kwargs)

    def _paged(
        self,
        page_type: type[P],
        cursor: int,
        limit: int,
        build: Callable[..., Call[P]],
        *args: Any,
        **kwargs: Any,
    ) -> Steps[P]:
        shards = len(self.shards)
        shard, inner = split_cursor(cursor, shards)
        pages: list[P] = []
        taken = 0
        while True:
            wanted = limit - taken if pages else limit
            page: P = (yield [build(self.shards[shard], *args, inner, wanted, **kwargs)])[0]
            pages.append(page)
            taken += page.size()
            if page.cursor:  # this shard has more
                following = page.cursor * shards + shard
            elif shard + 1 == shards:
                following = 0
            elif taken >= limit:
                following = shard + 1  # the next shard, from its start
            else:
                shard, inner = shard + 1, 0
                continue
            return page_type.joined(pages, following)


def first_found(replies: list[T | None]) -> T | None:
    """The first reply that is not None."""
    return next((reply for reply in replies if reply is not None), None)


def merged(calls: Step, merge: Callable[[list[T]], T]) -> Steps[T]:
    """One step of ``calls``, their replies merged."""
    return merge((yield calls))
