"""The call model: what one script call sends and how its reply is read, and the codecs
and limits every entry point's ops share.

Nothing here does I/O: an entry point's ops build :class:`Call` objects, and an
executor (:mod:`fairque.engine.executor`) sends them.
"""

from __future__ import annotations

import base64
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any, Generic, TypeVar

import msgspec
from msgspec.msgpack import Ext

from fairque.engine.fields import MICROS
from fairque.engine.scripts import Script
from fairque.errors import InvalidInput

T = TypeVar("T")
U = TypeVar("U")
Arg = str | bytes | int | float

MAX_BATCH = 10_000  # records per push
MAX_POP = 1_000  # records per pop
MAX_ERROR_LENGTH = 4_096  # characters of an error message kept
MAX_PAGE = 1_000  # records per page of a list
MAX_DEPTH = 100  # levels of nested arrays and maps in a value a client sends

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()


@dataclass(frozen=True)
class Wait:
    """A call that waits for a signal first: it is sent once one of the lists ``keys``
    gives an element (``BLPOP``) or ``seconds`` have passed, whichever comes first."""

    keys: tuple[str, ...]
    seconds: float


@dataclass(frozen=True)
class Replicas:
    """A write that returns once ``count`` replicas have it (``WAIT``), or raises
    :class:`~fairque.errors.NotReplicated` after ``timeout`` seconds."""

    count: int
    timeout: float


MAX_REPLICAS = 100
MAX_REPLICA_TIMEOUT = 3_600.0


@dataclass(frozen=True)
class Call(Generic[T]):
    """One script call: what to send and how to read the reply."""

    script: Script
    keys: Sequence[str]
    args: Sequence[Arg]
    parse: Callable[[Any], T]
    wait: Wait | None = None
    replicas: Replicas | None = None

    def then(self, read: Callable[[T], U]) -> Call[U]:
        """The same call, its parsed reply passed through ``read``."""
        parse = self.parse
        return Call(
            self.script, self.keys, self.args, lambda reply: read(parse(reply)), self.wait,
            self.replicas,
        )  # fmt: skip

    def after(self, wait: Wait) -> Call[T]:
        """The same call, sent after ``wait``."""
        return Call(self.script, self.keys, self.args, self.parse, wait, self.replicas)

    def replicated(self, replicas: int, timeout: float) -> Call[T]:
        """The same call, answered once ``replicas`` replicas have it (0: at once)."""
        check_replicas(replicas, timeout)
        if not replicas:
            return self
        return Call(
            self.script, self.keys, self.args, self.parse, self.wait, Replicas(replicas, timeout)
        )


def check_replicas(replicas: int, timeout: float) -> None:
    """Refuses a replica count or timeout that ``WAIT`` cannot take."""
    if isinstance(replicas, bool) or not isinstance(replicas, int):
        raise InvalidInput("replicas", f"must be an integer, not {replicas!r}")
    if not 0 <= replicas <= MAX_REPLICAS:
        raise InvalidInput("replicas", f"must be 0 to {MAX_REPLICAS}, not {replicas!r}")
    if not 0 < timeout <= MAX_REPLICA_TIMEOUT:
        raise InvalidInput(
            "replica_timeout",
            f"must be over 0 and at most {MAX_REPLICA_TIMEOUT:g} s, not {timeout!r}",
        )


def encode(value: Any, field: str, limit: int) -> bytes:
    """MessagePack bytes of ``value``; refuses what cannot be serialised or is too big."""
    try:
        data = _encoder.encode(value)
    except RecursionError:
        raise InvalidInput(field, "is nested too deeply to be serialised") from None
    except (TypeError, ValueError, OverflowError) as exc:  # UnicodeEncodeError is a ValueError
        raise InvalidInput(field, f"cannot be serialised with MessagePack: {exc}") from None
    if len(data) > limit:
        raise InvalidInput(field, f"is {len(data)} bytes serialised, over the {limit} limit")
    return data


_KEYS = (str, int, float, bytes)  # map keys JSON can carry too (bool is an int: refused)


def check_value(value: Any, field: str) -> None:
    """Refuses a value that a reader could not get back as it was sent: one nested more
    than :data:`MAX_DEPTH` levels, holding a MessagePack extension type (the timestamp
    included: msgspec reads it as a datetime, which JSON and a re-encoding would turn
    into a string), or a map key other than a string, a number or binary (JSON has no
    nil, boolean, array or map keys). The walk is iterative, so depth costs no stack."""
    pending: list[tuple[Any, int, str]] = [(value, 0, field)]
    while pending:
        item, depth, where = pending.pop()
        if isinstance(item, dict):
            pairs: Any = item.items()
        elif isinstance(item, (list, tuple)):
            pairs = enumerate(item)
        elif isinstance(item, (Ext, datetime, date, time)):
            raise InvalidInput(where, _NOT_PORTABLE)
        else:
            continue
        if depth >= MAX_DEPTH:  # named by its top: the full path would be 100 steps long
            raise InvalidInput(field, f"is nested more than {MAX_DEPTH} levels deep")
        keyed = isinstance(item, dict)
        for key, child in pairs:
            if keyed and (isinstance(key, bool) or not isinstance(key, _KEYS)):
                raise InvalidInput(where, f"has a map key {key!r}: keys are strings or numbers")
            if isinstance(child, (dict, list, tuple, Ext, datetime, date, time)):
                inner = (
                    f"{where}[{key}]" if not keyed or not isinstance(key, str) else f"{where}.{key}"
                )
                pending.append((child, depth + 1, inner))


_NOT_PORTABLE = (
    "holds a MessagePack extension type (or a timestamp): send nil, booleans, numbers, "
    "strings, binary, arrays and maps only"
)


def pack(value: Any) -> bytes:
    """MessagePack bytes of ``value`` built by the ops themselves (rows of a call)."""
    return _encoder.encode(value)


def decode(data: bytes) -> Any:
    """The value MessagePack ``data`` holds."""
    return _decoder.decode(data)


def new_ids(count: int) -> list[str]:
    """``count`` random 120-bit ids of 20 URL-safe characters: base64 of 15 random bytes
    (no padding), one system call and one encoding for all. Each key and queue entry
    that holds an id is 12 bytes shorter than with 32 hex digits, ~30 bytes less server
    memory per queued task. None begins with "-", which a command line would take for
    an option."""
    text = base64.urlsafe_b64encode(os.urandom(15 * count)).decode()
    ids = [text[i : i + 20] for i in range(0, 20 * count, 20)]
    return [f"_{found[1:]}" if found[0] == "-" else found for found in ids]


def default_worker_id() -> str:
    """``host:pid``, the worker id used when none is given."""
    return f"{socket.gethostname()}:{os.getpid()}"


def flat_rows(flat: Sequence[T], width: int) -> list[Sequence[T]]:
    """The rows of a flat reply, ``width`` values each (scripts send rows flat)."""
    return [flat[i : i + width] for i in range(0, len(flat), width)]


def text(value: bytes | None) -> str | None:
    """A stored string field, or None when it is absent or empty."""
    return value.decode() if value else None


def seconds(micros: bytes | int | None) -> float | None:
    """A stored time (us) in epoch seconds, or None when it is absent or empty."""
    return None if not micros else int(micros) / MICROS
