"""Every row that crosses Lua and Python, defined once as a field table.

A row is a run of values in a fixed order: the arguments a push sends for each task, the
values a pop returns for each task it leased, a finish's (id, lease token, result slot),
a tenant's shares and a task name's settings as the server stores them. Each is a
:class:`Row` here, and both sides read it from here:

- Python builds a row with :meth:`Row.pack` and reads one with :meth:`Row.unpack` (or by
  :meth:`Row.offset`), so no call builder or reader spells an order of its own.
- The script loader (:mod:`fairque.engine.scripts`) writes the table's constants into
  the Lua code: ``PUSH_ROW.priority`` becomes the field's offset in a row (0 for the
  first field), ``PUSH_ROW.WIDTH`` the number of fields, ``TENANT_SHARES.FIELDS`` the
  list of field names in order and ``TENANT_SHARES.DEFAULTS`` a table of their defaults.
  A script that names a field the table lacks does not load.

A stored row (shares, a name's settings) that ends before a field reads that field as
its default, in Lua and in Python: a field added at the end of a table needs no data
format change, as rows written before it read the default.

Tenants' shares and task names' settings are tables of :class:`ShareField`, which also
carry what users see of a setting (its kind, bounds and help); :mod:`fairque.queue.shares`
makes the change models, the HTTP bodies and the CLI's options from them.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MICROS = 1_000_000  # scripts count time in integer microseconds of the server clock
MAX_TIMEOUT_SECONDS = 7 * 24 * 3600.0
MAX_RETRIES = 1_000_000
# A task's own settings when neither its push nor its name's settings give them.
DEFAULT_PRIORITY = 3  # Priority.NORMAL
DEFAULT_MAX_RETRIES = 3
DEFAULT_TIMEOUT = 300.0  # seconds


@dataclass(frozen=True)
class Row:
    """The fields of one row, in order, each with the default a stored row that ends
    before it reads (as the script keeps it: an integer or a string)."""

    name: str  # what the scripts call it: ``PUSH_ROW``
    fields: tuple[str, ...]
    defaults: tuple[int | str, ...] = ()  # one per field; () for rows never stored
    offsets: dict[str, int] = field(init=False, repr=False, compare=False)
    getter: operator.itemgetter[Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.fields) < 2 or (self.defaults and len(self.defaults) != len(self.fields)):
            raise ValueError(f"{self.name}: two fields or more, one default per field")
        object.__setattr__(self, "offsets", {name: i for i, name in enumerate(self.fields)})
        object.__setattr__(self, "getter", operator.itemgetter(*self.fields))

    @property
    def width(self) -> int:
        """How many fields a row holds."""
        return len(self.fields)

    def offset(self, name: str) -> int:
        """Where ``name`` is in a row (0: first)."""
        return self.offsets[name]

    def pack(self, **values: Any) -> tuple[Any, ...]:
        """A row of ``values``, one per field, in the table's order; KeyError names a
        field left out."""
        row: tuple[Any, ...] = self.getter(values)
        return row

    def unpack(self, values: Sequence[Any]) -> dict[str, Any]:
        """A stored row's fields by name; a field past its end reads as its default."""
        given = len(values)
        missing = zip(self.fields[given:], self.defaults[given:], strict=True)
        return dict(zip(self.fields, values, strict=False)) | dict(missing)

    def lua(self, constant: str) -> str:
        """The Lua text of ``<name>.<constant>`` (see the module's docstring)."""
        if constant == "WIDTH":
            return str(self.width)
        if constant == "FIELDS":
            return "{" + ", ".join(f"'{name}'" for name in self.fields) + "}"
        if constant == "DEFAULTS" and self.defaults:
            pairs = zip(self.fields, self.defaults, strict=True)
            return "{" + ", ".join(f"{name} = {_lua_value(value)}" for name, value in pairs) + "}"
        if constant in self.offsets:
            return str(self.offsets[constant])
        raise ValueError(f"{self.name} has no field {constant!r}")


def _lua_value(value: int | str) -> str:
    return repr(value) if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class ShareField:
    """One setting of a tenant or a task name: ``kind`` int, float or bool; ``low`` to
    ``high`` (None for a flag) in the unit users give; the scripts keep ``value * scale``
    as an integer."""

    name: str
    kind: type
    default: float
    low: float | None = None
    high: float | None = None
    scale: int = 1
    help: str = ""
    metavar: str = "N"  # what the CLI's option takes

    @property
    def stored_default(self) -> int:
        """The default as the scripts keep it."""
        return round(self.default * self.scale)


SHARES: tuple[ShareField, ...] = (
    ShareField("weight", int, 1, 1, 1_000, help="Turns of the ring per round."),
    ShareField(
        "concurrency", int, 0, 0, 1_000_000,
        help="Tasks STARTED at once across all workers, at most (0: no limit).",
    ),
    ShareField(
        "rate", int, 0, 0, 10_000,  # the sliding log of starts is bounded by it
        help="Starts per period, at most (0: no limit).",
    ),
    ShareField(
        "period", float, 0.0, 0.001, 86_400.0, scale=MICROS, metavar="SECONDS",
        help="The window a rate counts, seconds (1 s until set).",
    ),
    ShareField("paused", bool, False, help="Nobody pops the tenant's tasks."),
)  # fmt: skip

# What only a task name has: the defaults of its tasks, which a push that does not give
# its own takes (and a pop that names no lease time), whichever language pushed.
TASK_DEFAULTS: tuple[ShareField, ...] = (
    ShareField(
        "timeout", float, 0.0, 0.0, MAX_TIMEOUT_SECONDS, scale=MICROS, metavar="SECONDS",
        help=f"Its tasks' timeout when a push gives none, seconds (0: {DEFAULT_TIMEOUT:g}).",
    ),
    ShareField(
        "max_retries", int, -1, -1, MAX_RETRIES,
        help=f"Its tasks' retries when a push gives none (-1: {DEFAULT_MAX_RETRIES}).",
    ),
    ShareField(
        "priority", int, 0, 0, 6,
        help=f"Its tasks' priority when a push gives none, 1 to 6 (0: {DEFAULT_PRIORITY}).",
    ),
    ShareField(
        "lease", float, 0.0, 0.0, MAX_TIMEOUT_SECONDS, scale=MICROS, metavar="SECONDS",
        help="The lease a pop takes of its tasks when the worker names none, seconds "
        "(0: the task's timeout).",
    ),
)  # fmt: skip

# A task name's limits and defaults (``FairQueue.set_limits``): the shares' fields but the
# weight, which a name does not have, then its tasks' defaults. A change carries a weight
# first (always 1), so that tenants' and names' changes read alike.
NAME_WEIGHT = ShareField("weight", int, 1, 1, 1)  # the bounds let nothing but 1 in
NAME_SHARES: tuple[ShareField, ...] = (
    NAME_WEIGHT,
    *(share for share in SHARES if share.name != "weight"),
)
LIMITS: tuple[ShareField, ...] = (*NAME_SHARES[1:], *TASK_DEFAULTS)
LIMIT_ARGS: tuple[ShareField, ...] = (*NAME_SHARES, *TASK_DEFAULTS)


def stored_row(name: str, fields: Sequence[ShareField]) -> Row:
    """The row the scripts store for ``fields``."""
    return Row(name, tuple(f.name for f in fields), tuple(f.stored_default for f in fields))


# The rows the scripts read and write (their layout is documented where they are used).
PUSH_ROW = Row(
    "PUSH_ROW",
    (
        "task_id",
        "tenant",
        "priority",
        "name",
        "max_retries",
        "timeout",
        "keep_result",
        "start",
        "headers",
        "dependencies",
    ),
)  # fmt: skip  (then the `dependencies` ids follow the row)
LEASED_ROW = Row(
    "LEASED_ROW",
    ("task_id", "user_id", "priority", "name", "payload", "attempts", "lease_deadline",
     "lease_token", "timeout", "max_retries", "created_at", "start_time", "prev_start_time",
     "headers"),
)  # fmt: skip
FINISH_ROW = Row("FINISH_ROW", ("task_id", "lease_token", "result_slot"))
# One failed attempt as a task's `errors` field keeps it (a MessagePack array of these
# rows, the newest last): server time (us), the attempt's number (from 1), the worker
# that held the lease, the exception's type, the error text, the traceback ('' if none).
ATTEMPT_ERROR = Row("ATTEMPT_ERROR", ("at", "attempt", "worker_id", "type", "message", "traceback"))
TENANT_SHARES = stored_row("TENANT_SHARES", SHARES)
# A name's settings as a change and a read carry them; stored in two rows: its limits in
# the shares' hash (as a tenant's shares, which every release reads), its tasks' defaults
# in a hash of their own (which releases before them never read).
NAME_SETTINGS = stored_row("NAME_SETTINGS", LIMIT_ARGS)
NAME_LIMITS = stored_row("NAME_LIMITS", NAME_SHARES)
NAME_DEFAULTS = stored_row("NAME_DEFAULTS", TASK_DEFAULTS)
# What a new task takes for the fields its push leaves out ('') and its name does not set.
NEW_TASK = Row(
    "NEW_TASK",
    ("priority", "max_retries", "timeout"),
    (DEFAULT_PRIORITY, DEFAULT_MAX_RETRIES, round(DEFAULT_TIMEOUT)),
)

_TABLES = (
    PUSH_ROW, LEASED_ROW, FINISH_ROW, ATTEMPT_ERROR, TENANT_SHARES, NAME_SETTINGS, NAME_LIMITS,
    NAME_DEFAULTS, NEW_TASK,
)  # fmt: skip
ROWS: dict[str, Row] = {row.name: row for row in _TABLES}
