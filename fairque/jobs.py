"""Strict-policy jobs (seed 003): the models and the sans-IO calls of the JQ master.

A :class:`Job` runs before every job of a larger ``priority``; ties go to the earliest
enqueued. Jobs live in the same task hashes, leases, registries and stats as the fair
policy's tasks, so maintenance (``reap``) and ``stats`` cover both. The clients send the
calls built here through :meth:`FairQueue.execute` (see :class:`JobQueue`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Annotated, Any, Literal, get_args

import msgspec
from msgspec import Meta

from fairque.errors import InvalidInput
from fairque.models import MAX_ID_LENGTH, MAX_TIMEOUT_SECONDS, TaskState, check_identifier
from fairque.ops import (
    MAX_BATCH,
    MAX_ERROR_LENGTH,
    MAX_POP,
    MICROS,
    Arg,
    Call,
    Ops,
    encode,
    new_ids,
)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
MAX_CONSTRAINTS = 100
MAX_MATCHERS = 16
JobState = Literal["queued", "scheduled", "started", "finished", "failed", "canceled"]
JOB_STATES: tuple[str, ...] = get_args(JobState)

Name = Annotated[str, Meta(min_length=1, max_length=MAX_ID_LENGTH)]
Int32 = Annotated[int, Meta(ge=INT32_MIN, le=INT32_MAX)]
Timeout = Annotated[float, Meta(gt=0, le=MAX_TIMEOUT_SECONDS)]
ConstraintId = Annotated[str, Meta(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
Field = Annotated[str, Meta(pattern=r"^(name|argument(\.[^.]+)*)$", max_length=MAX_ID_LENGTH)]


class Job(msgspec.Struct, forbid_unknown_fields=True):
    """A job as a pusher sends it (seed 003)."""

    name: Name
    argument: Any = None  # any MessagePack value
    priority: Int32 = 0  # smaller runs first
    max_retry: Annotated[int, Meta(ge=0, le=1000)] = 0  # 0: never retried
    keep_result: bool = False
    timeout: Timeout = 30.0  # seconds


class Success(msgspec.Struct, tag_field="type", tag="success", forbid_unknown_fields=True):
    """A job that succeeded (seed 003 result object)."""

    finished_at: datetime
    result: Any = None


class Failure(msgspec.Struct, tag_field="type", tag="failure", forbid_unknown_fields=True):
    """A job that failed (seed 003 result object)."""

    finished_at: datetime
    reason: Literal["other", "timeout"]
    should_retry: bool
    error: Any = None
    message: Annotated[str, Meta(max_length=MAX_ERROR_LENGTH)] = ""


Outcome = Success | Failure


def failure(reason: Literal["other", "timeout"], message: str, retry: bool = True) -> Failure:
    """A failure that happened now, on this side of the wire."""
    now = datetime.now(timezone.utc)
    return Failure(finished_at=now, reason=reason, should_retry=retry, message=message)


class Matcher(msgspec.Struct, forbid_unknown_fields=True):
    """One condition of a JobMatcher: ``field`` is ``name``, ``argument`` or
    ``argument.<key>.<key>...``; ``op`` compares its value with ``value``."""

    field: Field
    op: Literal["equals", "in", "prefix"]
    value: Any

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


class JobInfo(msgspec.Struct):
    """What is stored about one job."""

    id: str
    name: str | None
    argument: Any
    priority: int
    state: str
    attempts: int
    max_retry: int | None
    timeout: float
    keep_result: bool
    has_result: bool
    created_at: datetime
    finished_at: datetime | None = None
    worker_id: str | None = None
    last_error: str | None = None


class JobSummary(msgspec.Struct):
    """One line of a job list."""

    id: str
    name: str | None
    state: str
    priority: int
    attempts: int
    created_at: datetime | None


class JobPage(msgspec.Struct):
    """A page of a job list; pass ``cursor`` back for the next one (0: no more)."""

    jobs: list[JobSummary]
    cursor: int


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()
_LOCATION = re.compile(r" - at `\$\.?([^`]*)`$")


def invalid(exc: msgspec.ValidationError) -> InvalidInput:
    """The :class:`InvalidInput` for a msgspec validation error, naming the field."""
    message = str(exc)
    found = _LOCATION.search(message)
    field = found.group(1) if found and found.group(1) else "body"
    return InvalidInput(field, _LOCATION.sub("", message))


def validate(value: Any, kind: type[Any]) -> Any:
    """``value`` (a struct or plain data) checked against ``kind``; InvalidInput if not."""
    try:
        return msgspec.convert(msgspec.to_builtins(value), kind)
    except msgspec.ValidationError as exc:
        raise invalid(exc) from None


def _time(micros: bytes | None) -> datetime | None:
    if not micros:
        return None
    return datetime.fromtimestamp(int(micros) / MICROS, timezone.utc)


def _text(value: bytes | None) -> str | None:
    return value.decode() if value else None


class JobOps:
    """Builds the strict-policy calls of one namespace (on top of its :class:`Ops`)."""

    def __init__(self, ops: Ops) -> None:
        self.ops = ops

    def _call(self, name: str, args: Sequence[Arg], parse: Any) -> Call[Any]:
        return self.ops._call(name, args, parse)

    def push(self, jobs: Sequence[Job]) -> Call[list[str]]:
        """Enqueues ``jobs`` atomically; the reply parses to their new ids."""
        if not 1 <= len(jobs) <= MAX_BATCH:
            raise InvalidInput("jobs", f"push 1 to {MAX_BATCH} jobs, got {len(jobs)}")
        ids = new_ids(len(jobs))
        limit = self.ops.settings.max_payload_bytes
        arguments: list[Arg] = []
        rows = []
        for given, job_id in zip(jobs, ids, strict=True):
            # The argument is any MessagePack value: checked by encoding it, not by type.
            arguments.append(encode(given.argument, "argument", limit))
            job: Job = validate(msgspec.structs.replace(given, argument=None), Job)
            try:
                check_identifier(job.name)
            except ValueError as exc:
                raise InvalidInput("name", str(exc)) from None
            rows.append(
                (job_id, job.name, job.priority, job.max_retry, job.timeout, int(job.keep_result))
            )
        args = (len(rows), _encoder.encode(rows), *arguments)
        return self._call("job_push", args, lambda _reply: ids)

    def pop(
        self, worker_id: str, count: int, names: Sequence[str] = (), grace: float = 5.0
    ) -> Call[list[LeasedJob]]:
        """Leases up to ``count`` jobs (of ``names`` only, if given) for timeout + grace s."""
        if not 1 <= count <= MAX_POP:
            raise InvalidInput("count", f"must be 1 to {MAX_POP}, got {count}")
        args: list[Arg] = [worker_id, count, repr(grace), self.ops.settings.maintenance_batch]
        return self._call("job_pop", [*args, *names], _parse_leased)

    def complete(self, job: LeasedJob, outcome: Outcome, result_ttl: float) -> Call[TaskState]:
        """Records the outcome of a leased job; parses to its new state (LeaseLost if the
        lease was lost). The result object is kept for ``result_ttl`` s if asked for."""
        if isinstance(outcome, Success):
            kind, retry, message = "success", "0", ""
        else:
            kind, retry, message = "failure", str(int(outcome.should_retry)), outcome.message
        kept = encode(msgspec.to_builtins(outcome), "result", self.ops.settings.max_payload_bytes)
        args = (job.id, job.lease_token, kind, retry, message, kept, repr(result_ttl))
        return self._call("job_complete", args, _parse_state)

    def release(self, job: LeasedJob) -> Call[TaskState]:
        """Hands a leased job back to the queue, attempts unchanged (it never reached a
        worker); parses to its new state (LeaseLost if the lease was lost)."""
        args = (job.id, job.lease_token, "release", "0", "", "", "0")
        return self._call("job_complete", args, _parse_state)

    def take_result(self, job_id: str) -> Call[Any]:
        """The kept result object of a job, once; None after that or when none was kept."""
        return self._call(
            "job_result", (job_id,), lambda reply: None if reply is None else _decoder.decode(reply)
        )

    def get(self, job_id: str) -> Call[JobInfo | None]:
        """What is stored about a job; None if there is no such job."""
        return self._call("get", (job_id,), lambda reply: _parse_info(job_id, reply))

    def jobs(self, state: str, name: str | None, cursor: int, limit: int) -> Call[JobPage]:
        """A page of the jobs in ``state`` (named ``name``), from ``cursor``."""
        if state not in JOB_STATES:
            raise InvalidInput("state", f"must be one of {', '.join(JOB_STATES)}")
        args = (state, name or "", cursor, limit)
        return self._call("jobs", args, _parse_page)

    def set_constraint(self, constraint_id: str, constraint: Constraint) -> Call[int]:
        """Creates or replaces a constraint; parses to how many ready jobs it re-sorted."""
        checked = validate(constraint, Constraint)
        matchers = [(m.field, m.op, m.value) for m in checked.match]
        definition = (matchers, checked.concurrency or 0, checked.rate or 0, checked.period)
        blob = encode(definition, "match", self.ops.settings.max_payload_bytes)
        return self._call("constraint_set", (_constraint_id(constraint_id), blob), int)

    def delete_constraint(self, constraint_id: str) -> Call[int]:
        """Deletes a constraint; its jobs are limited by it no more."""
        return self._call("constraint_set", (_constraint_id(constraint_id), ""), int)

    def constraints(self) -> Call[list[ConstraintStatus]]:
        """Every constraint with its current use."""
        return self._call("constraints", (), _parse_constraints)


def _constraint_id(value: str) -> str:
    return validate(value, ConstraintId)  # type: ignore[no-any-return]


_POP_ROW = 9


def _parse_state(reply: bytes) -> TaskState:
    return TaskState(reply.decode())


def _parse_leased(reply: list[Any]) -> list[LeasedJob]:
    return [
        LeasedJob(
            id=reply[i].decode(),
            name=reply[i + 1].decode(),
            argument=_decoder.decode(reply[i + 2]),
            priority=int(reply[i + 3]),
            attempts=int(reply[i + 4]),
            timeout=float(reply[i + 5]),
            max_retry=int(reply[i + 6]),
            lease_token=str(reply[i + 7]),
            lease_deadline=reply[i + 8] / MICROS,
        )
        for i in range(0, len(reply), _POP_ROW)
    ]


def _parse_info(job_id: str, reply: list[Any]) -> JobInfo | None:
    flat, result = reply[0], reply[1]
    if not flat:
        return None
    f: dict[str, bytes] = {flat[i].decode(): flat[i + 1] for i in range(0, len(flat), 2)}
    max_retries = int(f["max_retries"])
    return JobInfo(
        id=job_id,
        name=_text(f.get("name")),
        argument=_decoder.decode(f["payload"]),
        priority=int(f["priority"]),
        state=f["state"].decode(),
        attempts=int(f.get("attempts", 0)),
        max_retry=None if max_retries < 0 else max_retries,
        timeout=float(f["timeout"]),
        keep_result=f.get("keep_result") == b"1",
        has_result=result is not None,
        created_at=_time(f["created_at"]),  # type: ignore[arg-type]
        finished_at=_time(f.get("finished_at")),
        worker_id=_text(f.get("worker_id")),
        last_error=_text(f.get("last_error")),
    )


_LIST_ROW = 6


def _parse_page(reply: list[Any]) -> JobPage:
    rows = reply[1:]
    jobs = [
        JobSummary(
            id=rows[i].decode(),
            name=_text(rows[i + 1]),
            state=_text(rows[i + 2]) or "expired",
            priority=int(rows[i + 3] or 0),
            attempts=int(rows[i + 4] or 0),
            created_at=_time(rows[i + 5]),
        )
        for i in range(0, len(rows), _LIST_ROW)
    ]
    return JobPage(jobs=jobs, cursor=int(reply[0]))


def _parse_constraints(reply: list[Any]) -> list[ConstraintStatus]:
    statuses = []
    for i in range(0, len(reply), 4):
        matchers, concurrency, rate, period = _decoder.decode(reply[i + 1])
        constraint = Constraint(
            match=[Matcher(field=f, op=op, value=value) for f, op, value in matchers],
            concurrency=concurrency or None,
            rate=rate or None,
            period=period,
        )
        statuses.append(
            ConstraintStatus(reply[i].decode(), constraint, int(reply[i + 2]), int(reply[i + 3]))
        )
    return statuses
