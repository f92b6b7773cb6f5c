"""Records: what every entry point stores in a ``task:<id>`` hash, and the one parser
that reads any of them.

Fair tasks, strict jobs and storage tasks share the hash, the leases, the registries and
the stats of their namespace, so maintenance and stats cover them all. Each record says
what it is in its ``kind`` field, written by the script that creates it; an entry point
turns a :class:`Record` of its own kind into its model and refuses the others, naming
the reader that fits.
"""

from __future__ import annotations

import math
import traceback
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import TYPE_CHECKING, Any

import msgspec

from fairque.engine.calls import MAX_ERROR_LENGTH
from fairque.engine.fields import ATTEMPT_ERROR, MICROS
from fairque.errors import InvalidInput

if TYPE_CHECKING:
    from collections.abc import Sequence

    from fairque.engine.calls import Arg, Call
    from fairque.engine.keys import Namespace

MAX_ID_LENGTH = 256
MAX_DELAY_SECONDS = 10 * 366 * 24 * 3600.0
# Scripts count time in microseconds since 1970 in Lua numbers, exact below 2**53, that is
# until the year 2255: every moment stored is checked to lie in [1970, 2200).
EARLIEST = datetime(1970, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(2200, 1, 1, tzinfo=timezone.utc)
# What a running task or job may report about itself (report), kept in its record.
MAX_LOG_LINES = 100  # the newest lines kept
MAX_LOG_LINE = 1_000  # characters of a line; a longer one is cut
MAX_PROGRESS_MESSAGE = 200  # characters of a progress message; a longer one is cut
# What a failed attempt leaves in its record (ErrorReport, AttemptError). The bounds keep
# a task's `errors` field under ERRORS_KEPT * (MAX_TRACEBACK + 4 * (MAX_ERROR_LENGTH +
# MAX_ERROR_TYPE + MAX_ID_LENGTH) + ~30) bytes, ~130 KB (4-byte characters throughout;
# ~63 KB with ASCII messages); a typical traceback makes it ~700 bytes an attempt
# (docs/deploy.md's sizing).
ERRORS_KEPT = 5  # the newest attempts' errors a task keeps (include/ending.lua keeps as many)
MAX_TRACEBACK = 8_192  # bytes of a traceback's text: its end (the innermost frames) is kept
MAX_TRACEBACK_FRAMES = 30  # the innermost frames of a traceback kept
MAX_ERROR_TYPE = 200  # characters of an exception's qualified type name


class TaskState(str, Enum):
    """Where a task is in its life."""

    SCHEDULED = "scheduled"
    DEFERRED = "deferred"
    QUEUED = "queued"
    STARTED = "started"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELED = "canceled"


class RecordKind(str, Enum):
    """Which entry point a record belongs to."""

    TASK = "task"  # a fair-queue task (FairQueue)
    JOB = "job"  # a strict-policy job (JobQueue, the JQ master)
    STORAGE = "storage"  # a task of a numbered storage queue (RedisStorage)


# What reads each kind, for the error that a record was read by the wrong entry point.
READERS = {
    RecordKind.TASK: "FairQueue.get",
    RecordKind.JOB: "JobQueue.get",
    RecordKind.STORAGE: "the storage's get_task",
}


# What check_identifier admits, for schemas (control characters are Unicode category Cc).
IDENTIFIER_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]+$"


def check_identifier(value: str) -> str:
    """Refuses empty, over-long, control-character or non-UTF-8 identifiers (they end up
    in keys); raises ValueError, which the models turn into InvalidInput."""
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {type(value).__name__} {value!r}")  # noqa: TRY004
    if not value:
        raise ValueError("must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"must be at most {MAX_ID_LENGTH} characters, got {len(value)}")
    if not value.isprintable():
        if any(unicodedata.category(c) == "Cc" for c in value):
            raise ValueError("must not contain control characters")
        if any(unicodedata.category(c) == "Cs" for c in value):
            raise ValueError("must be text that UTF-8 can encode (it holds a lone surrogate)")
    return value


def check_moment(value: datetime) -> datetime:
    """Refuses a naive datetime, or one outside [1970, 2200) (see LATEST); ValueError."""
    if value.tzinfo is None:
        raise ValueError("must be timezone-aware (e.g. datetime.now(timezone.utc))")
    if not EARLIEST <= value < LATEST:
        raise ValueError(f"must lie between 1970 and {LATEST.year}, got {value.isoformat()}")
    return value


def check_delay(seconds: float) -> float:
    """Refuses a delay that is not a finite number from 0 to MAX_DELAY_SECONDS; ValueError."""
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_DELAY_SECONDS:
        raise ValueError(f"must be 0 to {MAX_DELAY_SECONDS:g} s (10 years), got {seconds!r}")
    return seconds


@dataclass(frozen=True)
class Record:
    """One stored record: its fields as stored, its kept result and its dependency links."""

    record_id: str
    kind: RecordKind
    fields: Mapping[str, bytes]
    result: bytes | None
    blocked_by: tuple[str, ...]
    dependents: tuple[str, ...]

    @property
    def state(self) -> TaskState:
        return TaskState(self.fields["state"].decode())

    def wrong_reader(self, field: str) -> InvalidInput:
        """The error for reading this record with another kind's reader."""
        if self.kind is RecordKind.STORAGE:
            what = f"a task of storage queue {self.fields['queue'].decode()}"
        else:
            what = "a JQ master job" if self.kind is RecordKind.JOB else "a fair-queue task"
        reader = READERS[self.kind]
        return InvalidInput(field, f"{self.record_id} is {what}: read it with {reader}")


def read_record(record_id: str, reply: list[Any]) -> Record | None:
    """The record in the reply of ``namespace/get``; None if there is no such record."""
    flat, result, blocked_by, dependents = reply
    if not flat:
        return None
    fields = {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}
    return Record(
        record_id=record_id,
        kind=RecordKind(fields["kind"].decode()),
        fields=fields,
        result=result,
        blocked_by=tuple(sorted(member.decode() for member in blocked_by)),
        dependents=tuple(sorted(member.decode() for member in dependents)),
    )


@dataclass(frozen=True)
class ErrorReport:
    """What a worker says of an attempt that failed: the error's text (a task's
    ``last_error``), the exception's qualified type and its traceback, '' when unknown.
    :meth:`bounded` is what a record keeps of it."""

    message: str
    type: str = ""
    traceback: str = ""

    @classmethod
    def of(cls, exc: BaseException) -> ErrorReport:
        """The report of an exception: ``Type: text``, its qualified type (``module.Name``,
        the bare name for builtins) and its traceback without locals, bounded."""
        kind = type(exc)
        module = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
        lines = traceback.format_exception(
            kind, exc, exc.__traceback__, limit=-MAX_TRACEBACK_FRAMES
        )
        return cls(f"{kind.__name__}: {exc}", module + kind.__qualname__, "".join(lines)).bounded()

    def bounded(self) -> ErrorReport:
        """The report as records keep it: the message cut to MAX_ERROR_LENGTH characters,
        the type to MAX_ERROR_TYPE, the traceback to its last MAX_TRACEBACK bytes (the
        innermost frames and the exception's line are at its end)."""
        # A cut through a character drops its first bytes (ignored when decoded).
        kept = self.traceback.encode(errors="replace")[-MAX_TRACEBACK:].decode(errors="ignore")
        return ErrorReport(self.message[:MAX_ERROR_LENGTH], self.type[:MAX_ERROR_TYPE], kept)


def error_report(error: str | BaseException | ErrorReport) -> ErrorReport:
    """An attempt's error as a bounded report: a text, an exception (ErrorReport.of) or a
    report; InvalidInput for anything else."""
    if isinstance(error, ErrorReport):
        return error.bounded()
    if isinstance(error, BaseException):
        return ErrorReport.of(error)
    if isinstance(error, str):
        return ErrorReport(error).bounded()
    raise InvalidInput("error", f"must be text or an exception, got {type(error).__name__}")


@dataclass(frozen=True)
class AttemptError:
    """One failed attempt as its task keeps it (a task keeps its last 5): when it failed
    (``at``: server time, epoch seconds), its number (1 for the first), the worker that
    held its lease, the exception's qualified type, the error's text (``last_error``) and
    the traceback (its last 8 KiB). An expired lease is one too (``lease expired``, no
    type or traceback)."""

    at: float
    attempt: int
    worker_id: str | None
    type: str | None
    message: str
    traceback: str | None


def attempt_errors(fields: Mapping[str, bytes]) -> tuple[AttemptError, ...]:
    """The attempt errors a record keeps, the oldest first (none for a record written
    before releases kept them)."""
    raw = fields.get("errors")
    if not raw:
        return ()
    rows = msgspec.msgpack.decode(raw, type=list[tuple[int, int, str, str, str, str]])
    errors = []
    for row in rows:
        one = ATTEMPT_ERROR.unpack(row)
        errors.append(
            AttemptError(
                at=one["at"] / MICROS,
                attempt=one["attempt"],
                worker_id=one["worker_id"] or None,
                type=one["type"] or None,
                message=one["message"],
                traceback=one["traceback"] or None,
            )
        )
    return tuple(errors)


# Calls every entry point makes on its records (the scripts in lua/namespace/).


def get(namespace: Namespace, record_id: str) -> Call[Record | None]:
    """Reads a record of any kind; parses to None when there is no such record."""
    return namespace.call(
        "namespace/get", (), lambda reply: read_record(record_id, reply), {"id": record_id}
    )


def cancel(namespace: Namespace, record_id: str, abort: bool) -> Call[bool]:
    """Cancels a record that has not started, or with ``abort`` a fair-queue task that
    runs (its worker hears of it on the ``abort`` channel); parses to whether it was
    canceled."""
    return namespace.call("namespace/cancel", (record_id, int(abort)), lambda reply: reply == 1)


def retry(namespace: Namespace, record_id: str) -> Call[bool]:
    """Queues a FAILED record again now; parses to whether it was failed."""
    return namespace.call("namespace/retry", (record_id,), lambda reply: reply == b"failed")


def bounded_report(
    progress: float | None, message: str, lines: Sequence[str]
) -> tuple[float | None, str, list[str]]:
    """A report as records keep it: InvalidInput for a progress that is not a finite
    number or a message or line that is not text; the message cut to MAX_PROGRESS_MESSAGE
    characters, and the newest MAX_LOG_LINES lines, each cut to MAX_LOG_LINE."""
    if progress is not None and (
        isinstance(progress, bool)
        or not isinstance(progress, (int, float))
        or not math.isfinite(progress)
    ):
        raise InvalidInput("progress", f"must be a finite number, got {progress!r}")
    for name, value in (("message", message), *(("lines", line) for line in lines)):
        if not isinstance(value, str):
            raise InvalidInput(name, f"must be text, got {type(value).__name__}")
    kept = [line[:MAX_LOG_LINE] for line in list(lines)[-MAX_LOG_LINES:]]
    return None if progress is None else float(progress), message[:MAX_PROGRESS_MESSAGE], kept


def report(
    namespace: Namespace,
    record_id: str,
    lease_token: str,
    *,
    progress: float | None,
    message: str,
    lines: Sequence[str],
) -> Call[int]:
    """Records a running record's progress and log lines (bounded_report), if
    ``lease_token`` still holds its lease (``queue/report``, which fair tasks and strict
    jobs share); parses to the lines the record holds. Raises LeaseLost if it does not."""
    progress, message, kept = bounded_report(progress, message, lines)
    args: tuple[Arg, ...] = (
        record_id,
        lease_token,
        "" if progress is None else repr(progress),
        message,
        MAX_LOG_LINES,
        *kept,
    )
    return namespace.call("queue/report", args, int, params={"id": record_id})
