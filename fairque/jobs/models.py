"""Strict-policy jobs: what a pusher sends, what a worker answers, and
constraints on the jobs a matcher selects.

A :class:`Job` runs before every job of a larger ``priority``; ties go to the earliest
enqueued. Jobs live in the same task hashes, leases, registries and stats as the fair
queue's tasks, so maintenance and stats cover both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any, Literal, get_args

import msgspec
from msgspec import Meta

from fairque.engine.calls import MAX_DEPTH, MAX_ERROR_LENGTH
from fairque.engine.fields import MAX_TIMEOUT_SECONDS
from fairque.engine.records import (
    IDENTIFIER_PATTERN,
    MAX_ERROR_TYPE,
    MAX_ID_LENGTH,
    MAX_TRACEBACK,
    AttemptError,
    ErrorReport,
)
from fairque.errors import InvalidInput

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
MAX_CONSTRAINTS = 100
MAX_MATCHERS = 16
JobState = Literal["queued", "scheduled", "started", "finished", "failed", "canceled"]
JOB_STATES: tuple[str, ...] = get_args(JobState)

# A job name: no control characters (records.check_identifier: names end up in keys).
Name = Annotated[str, Meta(min_length=1, max_length=MAX_ID_LENGTH, pattern=IDENTIFIER_PATTERN)]
Int32 = Annotated[int, Meta(ge=INT32_MIN, le=INT32_MAX)]
Timeout = Annotated[float, Meta(gt=0, le=MAX_TIMEOUT_SECONDS)]
ConstraintId = Annotated[str, Meta(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
Field = Annotated[str, Meta(pattern=r"^(name|argument(\.[^.]+)*)$", max_length=MAX_ID_LENGTH)]

# The values jobs carry (argument, result, error, a matcher's value): what every reader
# gets back as sent (engine.calls.check_value refuses the rest). JSON Schema of it, for
# the OpenAPI documents, which hold it as the component "Value": a schema with no type
# (any value), its bounds in words. Written as a list of types whose arrays and maps
# refer back to it, it was exact, and generators could not read it (openapi-python-client
# dropped every schema using it; openapi-typescript made it `any`).
VALUE_REF = {"$ref": "#/components/schemas/Value"}
VALUE_SCHEMA: dict[str, Any] = {
    "description": "Any value: null, a boolean, a number, a string, an array or an object "
    "(in MessagePack also binary, and maps keyed by numbers or binary). Integers from "
    "-2^63 to 2^64-1 (in JSON, a number with no fraction beyond them is read as a float); "
    f"at most {MAX_DEPTH} levels deep; no MessagePack extension types (the timestamp "
    "included). A value outside these bounds is refused (400), naming where it is.",
}
Value = Annotated[Any, Meta(extra_json_schema=VALUE_REF)]


class Job(msgspec.Struct, forbid_unknown_fields=True):
    """A job as a pusher sends it."""

    name: Name
    argument: Value = None  # any MessagePack value a reader gets back as sent
    priority: Int32 = 0  # smaller runs first
    max_retry: Annotated[int, Meta(ge=0, le=1000)] = 0  # 0: never retried
    keep_result: bool = False
    timeout: Timeout = 30.0  # seconds


class Success(msgspec.Struct, tag_field="type", tag="success", forbid_unknown_fields=True):
    """A job that succeeded (a result object)."""

    finished_at: datetime
    result: Value = None


class Failure(msgspec.Struct, tag_field="type", tag="failure", forbid_unknown_fields=True):
    """A job that failed (a result object)."""

    finished_at: datetime
    reason: Literal["other", "timeout"]
    should_retry: bool
    error: Value = None
    message: Annotated[str, Meta(max_length=MAX_ERROR_LENGTH)] = ""
    # Not in the 003 result object: what a job's `errors` keeps of the attempt besides
    # its message (a traceback past MAX_TRACEBACK bytes keeps its end).
    error_type: Annotated[
        str,
        Meta(
            max_length=MAX_ERROR_TYPE,
            description="The exception's qualified type (`module.Name`), if any.",
        ),
    ] = ""
    traceback: Annotated[
        str,
        Meta(
            description="The failure's traceback, if any; its last "
            f"{MAX_TRACEBACK} bytes are kept with the job."
        ),
    ] = ""


JobOutcome = Success | Failure  # what a worker answers for a job


def failure(
    reason: Literal["other", "timeout"], error: str | ErrorReport, retry: bool = True
) -> Failure:
    """A failure that happened now, on this side of the wire: its message, or the report
    of the exception that made it (with its type and traceback)."""
    now = datetime.now(timezone.utc)
    report = ErrorReport(error) if isinstance(error, str) else error
    return Failure(
        finished_at=now,
        reason=reason,
        should_retry=retry,
        message=report.message,
        error_type=report.type,
        traceback=report.traceback,
    )


class Matcher(msgspec.Struct, forbid_unknown_fields=True):
    """One condition of a JobMatcher: ``field`` is ``name``, ``argument`` or
    ``argument.<key>.<key>...``; ``op`` compares its value with ``value``."""

    field: Field
    op: Literal["equals", "in", "prefix"]
    value: Value

    @staticmethod
    def json_schema(generated: dict[str, Any]) -> dict[str, Any]:
        """The schema msgspec ``generated``, with what __post_init__ checks: one variant
        per op, each with the value it takes (for the OpenAPI document)."""
        values = {"equals": VALUE_REF, "in": {"type": "array", "items": VALUE_REF}}
        values["prefix"] = {"type": "string"}
        variants = [
            {
                "title": f"{op.title()}Matcher",  # a generated client's class for it
                **{key: generated[key] for key in ("type", "required", "additionalProperties")},
                "properties": {**generated["properties"], "op": {"const": op}, "value": value},
            }
            for op, value in values.items()
        ]
        return {"title": generated["title"], "description": generated["description"],
                "oneOf": variants}  # fmt: skip

    def __post_init__(self) -> None:
        if self.op == "in" and not isinstance(self.value, list):
            raise ValueError("`value` of an 'in' matcher must be a list")
        if self.op == "prefix" and not isinstance(self.value, str):
            raise ValueError("`value` of a 'prefix' matcher must be a string")


class Constraint(msgspec.Struct, forbid_unknown_fields=True):
    """Limits on the jobs a JobMatcher (all of ``match``) selects: at most ``concurrency``
    running at once and / or at most ``rate`` started per ``period`` seconds."""

    match: Annotated[list[Matcher], Meta(max_length=MAX_MATCHERS)]
    concurrency: Annotated[int, Meta(ge=1, le=10_000)] | None = None
    rate: Annotated[int, Meta(ge=1, le=1_000_000)] | None = None
    period: Annotated[float, Meta(gt=0, le=MAX_TIMEOUT_SECONDS)] = 1.0

    @staticmethod
    def json_schema(generated: dict[str, Any]) -> dict[str, Any]:
        """The schema msgspec ``generated``, with what __post_init__ checks (for the
        OpenAPI document): one variant per limit that must be set, each a whole object
        (generators drop properties written beside an ``anyOf``)."""
        variants = []
        for need in ("concurrency", "rate"):
            properties = dict(generated["properties"])
            properties[need] = next(  # set: not null
                kind for kind in properties[need]["anyOf"] if kind.get("type") == "integer"
            )
            variants.append({
                "title": f"{need.title()}Constraint",  # a generated client's class for it
                **{key: generated[key] for key in ("type", "additionalProperties")},
                "properties": properties,
                "required": [*generated["required"], need],
            })  # fmt: skip
        return {"title": generated["title"], "description": generated["description"],
                "anyOf": variants}  # fmt: skip

    def __post_init__(self) -> None:
        if self.concurrency is None and self.rate is None:
            raise ValueError("set `concurrency`, `rate`, or both")


class ConstraintStatus(msgspec.Struct):
    """A constraint and how much of it is in use now."""

    id: str
    constraint: Constraint
    running: int  # jobs it selects that are running
    started: int  # jobs it selects started within the last `period` (0 without a rate)


@dataclass(slots=True)
class LeasedJob:
    """A job handed to a worker until ``lease_deadline`` (epoch seconds)."""

    id: str
    name: str
    argument: Any
    priority: int
    attempts: int  # failed or expired attempts before this one
    timeout: float
    max_retry: int
    lease_token: str
    lease_deadline: float


# What a job's `attempts` counts, said in the OpenAPI documents too.
Attempts = Annotated[
    int,
    msgspec.Meta(
        description="Attempts that failed or whose lease expired, so far: 0 while the first "
        "runs, and 0 for a job that finished at its first attempt (not the runs started)."
    ),
]


class JobInfo(msgspec.Struct):
    """What is stored about one job."""

    id: str
    name: str | None
    argument: Value
    priority: int
    state: str
    attempts: Attempts
    max_retry: int | None
    timeout: float
    keep_result: bool
    has_result: bool
    created_at: datetime
    finished_at: datetime | None = None
    worker_id: str | None = None
    last_error: str | None = None
    errors: tuple[AttemptError, ...] = ()  # the newest attempts' errors, the oldest first
    progress: float | None = None  # what the job last reported (JobQueue.report)
    progress_message: str | None = None
    progress_at: datetime | None = None
    logs: tuple[str, ...] = ()  # the newest lines it logged


class JobSummary(msgspec.Struct):
    """One line of a job list."""

    id: str
    name: str | None
    state: str
    priority: int
    attempts: Attempts
    created_at: datetime | None


class JobPage(msgspec.Struct):
    """A page of a job list; pass ``cursor`` back for the next one (0: no more)."""

    jobs: list[JobSummary]
    cursor: int

    def size(self) -> int:
        """How many jobs the page holds."""
        return len(self.jobs)

    @classmethod
    def joined(cls, pages: Sequence[JobPage], cursor: int) -> JobPage:
        """One page of ``pages``' jobs, in order, with ``cursor`` (a sharded list's)."""
        return cls([job for page in pages for job in page.jobs], cursor)


_LOCATION = re.compile(r" - at `\$\.?([^`]*)`$")
_NAMED = re.compile(r"field `([^`]+)`")


def invalid(exc: msgspec.ValidationError) -> InvalidInput:
    """The :class:`InvalidInput` for a msgspec validation error, naming the field: where
    msgspec found the problem (``priority``, ``[1].priority`` in a list), joined with the
    field a missing or unknown field error names."""
    message = str(exc)
    found = _LOCATION.search(message)
    path = found.group(1) if found else ""
    named = _NAMED.search(message)
    if named:
        path = f"{path}.{named.group(1)}" if path else named.group(1)
    return InvalidInput(path or "body", _LOCATION.sub("", message))


def validate(value: Any, kind: type[Any]) -> Any:
    """``value`` (a struct or plain data) checked against ``kind``; InvalidInput if not.
    Binary values stay bytes (they are MessagePack bin, not base64 strings)."""
    try:
        return msgspec.convert(msgspec.to_builtins(value, builtin_types=(bytes,)), kind)
    except msgspec.ValidationError as exc:
        raise invalid(exc) from None
