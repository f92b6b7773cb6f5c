"""The strict policy's sans-IO core: jobs to script calls, replies to job models."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import msgspec

from fairque.config import MAX_PAYLOAD_BYTES
from fairque.engine import records
from fairque.engine.calls import (
    MAX_BATCH,
    MAX_POP,
    Arg,
    Call,
    check_value,
    decode,
    encode,
    flat_rows,
    new_ids,
    pack,
    text,
)
from fairque.engine.fields import MICROS
from fairque.engine.keys import Namespace
from fairque.engine.records import (
    ErrorReport,
    Record,
    RecordKind,
    TaskState,
    attempt_errors,
    check_identifier,
)
from fairque.errors import FairQueueError, InvalidInput, from_script_error
from fairque.jobs.models import (
    JOB_STATES,
    Constraint,
    ConstraintId,
    ConstraintStatus,
    Job,
    JobInfo,
    JobOutcome,
    JobPage,
    JobSummary,
    LeasedJob,
    Matcher,
    Success,
    validate,
)


def _time(micros: bytes | None) -> datetime | None:
    if not micros:
        return None
    return datetime.fromtimestamp(int(micros) / MICROS, timezone.utc)


MAX_DEFINITION_BYTES = 1024 * 1024  # a constraint's matchers, serialised


class JobOps:
    """Builds the strict-policy calls of one namespace."""

    def __init__(self, namespace: Namespace) -> None:
        self.namespace = namespace

    def push(self, jobs: Sequence[Job]) -> Call[list[str]]:
        """Enqueues ``jobs`` atomically; the reply parses to their new ids."""
        if not 1 <= len(jobs) <= MAX_BATCH:
            raise InvalidInput("jobs", f"push 1 to {MAX_BATCH} jobs, got {len(jobs)}")
        ids = new_ids(len(jobs))
        limit = MAX_PAYLOAD_BYTES  # the namespace's own limit is checked by the script
        arguments: list[Arg] = []
        rows: list[Any] = []  # the rows one after the other
        for index, (given, job_id) in enumerate(zip(jobs, ids, strict=True)):
            try:
                job, argument = _checked(given, limit)
            except InvalidInput as exc:  # in a batch, say which job: [1].priority
                if len(jobs) == 1:
                    raise
                raise InvalidInput(f"[{index}].{exc.field}", exc.message) from None
            arguments.append(argument)
            rows += (job_id, job.name, job.priority, job.max_retry, job.timeout,
                     int(job.keep_result))  # fmt: skip
        args = (len(jobs), pack(rows), *arguments)
        return self.namespace.call("jobs/push", args, lambda _reply: ids)

    def push_one(self, job: Job) -> Call[str]:
        """Enqueues one job; the reply parses to its new id."""
        return self.push([job]).then(lambda ids: ids[0])

    def pop(
        self, worker_id: str, count: int, names: Sequence[str] = (), grace: float = 5.0
    ) -> Call[list[LeasedJob]]:
        """Leases up to ``count`` jobs (of ``names`` only, if given) for timeout + grace s."""
        if not 1 <= count <= MAX_POP:
            raise InvalidInput("count", f"must be 1 to {MAX_POP}, got {count}")
        args: list[Arg] = [worker_id, count, repr(grace)]
        return self.namespace.call("jobs/pop", [*args, *names], _parse_leased)

    def complete(self, job: LeasedJob, outcome: JobOutcome, result_ttl: float) -> Call[TaskState]:
        """Records the outcome of a leased job; parses to its new state (LeaseLost if the
        lease was lost). The result object is kept for ``result_ttl`` s if asked for."""
        return self.complete_many([(job, outcome)], result_ttl).then(_one_state)

    def release(self, job: LeasedJob) -> Call[TaskState]:
        """Hands a leased job back to the queue, attempts unchanged (it never reached a
        worker); parses to its new state (LeaseLost if the lease was lost)."""
        return self.complete_many([(job, None)], 0.0).then(_one_state)

    def complete_many(
        self, outcomes: Sequence[tuple[LeasedJob, JobOutcome | None]], result_ttl: float
    ) -> Call[list[TaskState | FairQueueError]]:
        """Records outcomes of leased jobs (None: release the job), each on its own; parses
        to each job's new state, or the error of its outcome (LeaseLost if its lease was
        lost). A result that cannot be kept is refused before anything is sent."""
        if not 1 <= len(outcomes) <= MAX_BATCH:
            raise InvalidInput("outcomes", f"send 1 to {MAX_BATCH}, got {len(outcomes)}")
        rows: list[Any] = []  # the rows one after the other
        kept: list[Arg] = []
        for job, outcome in outcomes:
            if outcome is None:
                rows += (job.id, job.lease_token, "release", 0, "", 0.0, "", "")
                kept.append("")
                continue
            if isinstance(outcome, Success):
                check_value(outcome.result, "result")
                row: tuple[Any, ...] = ("success", 0, "", float(result_ttl), "", "")
            else:
                check_value(outcome.error, "error")
                report = ErrorReport(outcome.message, outcome.error_type, outcome.traceback)
                report = report.bounded()
                row = ("failure", int(outcome.should_retry), report.message, float(result_ttl),
                       report.type, report.traceback)  # fmt: skip
            # Kept as the worker sent it: binary stays MessagePack bin (to_builtins would
            # make it a base64 string); finished_at becomes its ISO 8601 string.
            plain = msgspec.to_builtins(outcome, builtin_types=(bytes,))
            kept.append(encode(plain, "result", MAX_PAYLOAD_BYTES))
            rows += (job.id, job.lease_token, *row)
        args = (len(outcomes), pack(rows), *kept)
        return self.namespace.call("jobs/complete", args, _parse_states)

    def take_result(self, job_id: str) -> Call[Any]:
        """The kept result object of a job, once; None after that or when none was kept."""
        return self.namespace.call(
            "jobs/result",
            (),
            lambda reply: None if reply is None else decode(reply),
            params={"id": job_id},
        )

    def get(self, job_id: str) -> Call[JobInfo | None]:
        """What is stored about a job; None if there is no such job."""
        return records.get(self.namespace, job_id).then(_job_info)

    def report(
        self,
        job_id: str,
        lease_token: str,
        progress: float | None = None,
        message: str = "",
        lines: Sequence[str] = (),
    ) -> Call[int]:
        """Records a running job's progress and log lines, as a fair task's
        (records.report, bounded alike); parses to the lines the record holds. Raises
        LeaseLost if ``lease_token`` no longer holds the job."""
        return records.report(
            self.namespace, job_id, lease_token, progress=progress, message=message, lines=lines
        )

    def cancel(self, job_id: str) -> Call[bool]:
        """Cancels a job that has not started; parses to whether it was canceled."""
        return records.cancel(self.namespace, job_id, abort=False)

    def retry(self, job_id: str) -> Call[bool]:
        """Queues a FAILED job again now; parses to whether it was failed."""
        return records.retry(self.namespace, job_id)

    def jobs(self, state: str, name: str | None, cursor: int, limit: int) -> Call[JobPage]:
        """A page of the jobs in ``state`` (named ``name``), from ``cursor``."""
        if state not in JOB_STATES:
            raise InvalidInput("state", f"must be one of {', '.join(JOB_STATES)}")
        args = (state, name or "", cursor, limit)
        return self.namespace.call("jobs/list", args, _parse_page)

    def set_constraint(self, constraint_id: str, constraint: Constraint) -> Call[int]:
        """Creates or replaces a constraint; parses to how many ready jobs it re-sorted."""
        checked = validate(constraint, Constraint)
        for index, matcher in enumerate(checked.match):
            check_value(matcher.value, f"match[{index}].value")
        matchers = [(m.field, m.op, m.value) for m in checked.match]
        definition = (matchers, checked.concurrency or 0, checked.rate or 0, checked.period)
        blob = encode(definition, "match", MAX_DEFINITION_BYTES)
        return self.namespace.call(
            "jobs/constraint_set", (_constraint_id(constraint_id), blob), int
        )

    def delete_constraint(self, constraint_id: str) -> Call[int]:
        """Deletes a constraint; its jobs are limited by it no more."""
        return self.namespace.call("jobs/constraint_set", (_constraint_id(constraint_id), ""), int)

    def constraints(self) -> Call[list[ConstraintStatus]]:
        """Every constraint with its current use."""
        return self.namespace.call("jobs/constraints", (), _parse_constraints)


def _checked(given: Job, limit: int) -> tuple[Job, bytes]:
    """A job validated, and its argument encoded. The argument is any MessagePack value
    that every reader gets back as sent: checked by walking and encoding it."""
    check_value(given.argument, "argument")
    argument = encode(given.argument, "argument", limit)
    job: Job = validate(msgspec.structs.replace(given, argument=None), Job)
    try:
        check_identifier(job.name)
    except ValueError as exc:
        raise InvalidInput("name", str(exc)) from None
    return job, argument


def _constraint_id(value: str) -> str:
    return validate(value, ConstraintId)  # type: ignore[no-any-return]


_POP_ROW = 9


def _parse_state(reply: bytes) -> TaskState:
    return TaskState(reply.decode())


def _parse_states(reply: list[bytes]) -> list[TaskState | FairQueueError]:
    """Per outcome: its state, or the error of the script's '!' answer."""
    return [
        from_script_error(each[1:].decode()) if each[:1] == b"!" else TaskState(each.decode())
        for each in reply
    ]


def _one_state(states: list[TaskState | FairQueueError]) -> TaskState:
    if isinstance(states[0], FairQueueError):
        raise states[0]
    return states[0]


def _parse_leased(reply: list[Any]) -> list[LeasedJob]:
    return [
        LeasedJob(
            id=reply[i].decode(),
            name=reply[i + 1].decode(),
            argument=decode(reply[i + 2]),
            priority=int(reply[i + 3]),
            attempts=int(reply[i + 4]),
            timeout=float(reply[i + 5]),
            max_retry=int(reply[i + 6]),
            lease_token=str(reply[i + 7]),
            lease_deadline=reply[i + 8] / MICROS,
        )
        for i in range(0, len(reply), _POP_ROW)
    ]


def _job_info(record: Record | None) -> JobInfo | None:
    return None if record is None else job_info(record)


def job_info(record: Record) -> JobInfo:
    """The :class:`JobInfo` of a strict job's record; InvalidInput for another kind."""
    if record.kind is not RecordKind.JOB:
        raise record.wrong_reader("job_id")
    f = record.fields
    max_retries = int(f["max_retries"])
    return JobInfo(
        id=record.record_id,
        name=text(f.get("name")),
        argument=decode(f["payload"]),
        priority=int(f["priority"]),
        state=record.state.value,
        attempts=int(f.get("attempts", 0)),
        max_retry=None if max_retries < 0 else max_retries,
        timeout=float(f["timeout"]),
        keep_result=f.get("keep_result") == b"1",
        has_result=record.result is not None,
        created_at=_time(f["created_at"]),  # type: ignore[arg-type]
        finished_at=_time(f.get("finished_at")),
        worker_id=text(f.get("worker_id")),
        last_error=text(f.get("last_error")),
        errors=attempt_errors(f),
        progress=None if "progress" not in f else float(f["progress"]),
        progress_message=text(f.get("progress_message")),
        progress_at=_time(f.get("progress_at")),
        logs=tuple(decode(f["logs"])) if "logs" in f else (),
    )


def kept_outcome(record: Record) -> JobOutcome | None:
    """The outcome a job's record keeps for its pusher, read without taking it (the
    pusher's read stays the one that deletes it); None if none is kept."""
    return None if record.result is None else validate(decode(record.result), JobOutcome)  # type: ignore[arg-type]


def _parse_page(reply: list[Any]) -> JobPage:
    jobs = [
        JobSummary(
            id=job_id.decode(),
            name=text(name),
            state=text(state) or "expired",
            priority=int(priority or 0),
            attempts=int(attempts or 0),
            created_at=_time(created_at),
        )
        for job_id, name, state, priority, attempts, created_at in flat_rows(reply[1:], 6)
    ]
    return JobPage(jobs=jobs, cursor=int(reply[0]))


def _parse_constraints(reply: list[Any]) -> list[ConstraintStatus]:
    statuses = []
    for i in range(0, len(reply), 4):
        matchers, concurrency, rate, period = decode(reply[i + 1])
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
