"""The scheduler's sans-IO core: schedule records to script calls, and run planning.

Like every entry point's ops, nothing here does I/O: the sync and async schedulers send these
calls. Times are integer microseconds of the server clock, as in the scripts.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property
from typing import Any, Literal, TypeVar

import msgspec

from fairque.engine.calls import Arg, Call, decode, encode
from fairque.engine.fields import MICROS
from fairque.engine.keys import Namespace
from fairque.errors import FairQueueError, InvalidInput, from_script_error
from fairque.queue import Maintenance
from fairque.queue.calls import maintenance, push
from fairque.scheduler import cron
from fairque.scheduler.config import SchedulerConfig, live_window
from fairque.scheduler.models import MissedRuns, Schedule, ScheduleInfo, ScheduleState

T = TypeVar("T")
_MAX_DEFINITION_BYTES = 1024 * 1024


def new_schedule_id() -> str:
    """A random schedule id (16 hex digits)."""
    return os.urandom(8).hex()


def next_run(schedule: Schedule, after: int) -> int:
    """The schedule's first run strictly after ``after`` (us).

    Interval schedules keep to the grid ``start_at + k * interval``, so a late or missed
    run does not shift the runs after it.
    """
    if schedule.cron is not None:
        seconds = cron.next_after(schedule.cron, schedule.timezone, after / MICROS)
        return round(seconds * MICROS)
    assert schedule.interval is not None  # validated: cron or interval
    assert schedule.start_at is not None  # set by anchored() when stored
    interval = max(1, round(schedule.interval * MICROS))
    anchor = round(schedule.start_at.timestamp() * MICROS)
    if after < anchor:
        return anchor
    return anchor + interval * ((after - anchor) // interval + 1)


def anchored(schedule: Schedule, now: int) -> Schedule:
    """An interval schedule with no start time starts one interval from ``now``."""
    if schedule.interval is None or schedule.start_at is not None:
        return schedule
    start = datetime.fromtimestamp(now / MICROS + schedule.interval, timezone.utc)
    return schedule.model_copy(update={"start_at": start})


@dataclass(frozen=True)
class Grant:
    """A lock held on a due schedule, with what was read under it."""

    schedule_id: str
    token: str
    now: int  # server time when the lock was taken
    next_run: bytes  # the schedule's next run as stored (compared again when firing)
    definition: bytes  # the stored Schedule, read when the run is planned
    version: int
    pending_run: int | None  # a run whose submission failed and is being retried

    @property
    def run_at(self) -> int:
        """When the run at hand was due: a retried run keeps its own due time."""
        return self.pending_run or int(float(self.next_run))

    @cached_property
    def schedule(self) -> Schedule:
        """The stored definition; refused (InvalidInput) if this version cannot read it."""
        try:
            return Schedule.model_validate(decode(self.definition))
        except msgspec.DecodeError as exc:
            raise InvalidInput("schedule", f"the stored definition is unreadable: {exc}") from None


@dataclass(frozen=True)
class Plan:
    """What to do with one due run."""

    run_at: int  # when the run was due (us); part of its task id
    following: int  # the run after it
    submit: bool  # False: a missed run dropped by MissedRuns.SKIP
    task_id: str


def plan_run(grant: Grant) -> Plan:
    """Decides a due run. A run at most ``misfire_grace`` late is submitted and the
    schedule goes on with the run after it, so short delays are caught up run by run. A
    later run is missed: submitted (RUN_ONCE) or dropped (SKIP), and the schedule goes on
    with its first run after now, so missed runs never come as a burst."""
    schedule, now, run_at = grant.schedule, grant.now, grant.run_at
    if now - run_at <= schedule.misfire_grace * MICROS:
        return Plan(run_at, next_run(schedule, run_at), True, f"{grant.schedule_id}@{run_at}")
    submit = schedule.missed is MissedRuns.RUN_ONCE
    return Plan(run_at, next_run(schedule, now), submit, f"{grant.schedule_id}@{run_at}")


@dataclass(frozen=True)
class Claim:
    """One cycle's look at the schedules: the due ones this instance locked."""

    now: int
    grants: list[Grant]  # due schedules locked by this instance, read under their locks
    busy: int  # due schedules found locked by another instance
    earliest: int | None  # the earliest next run of any active schedule


@dataclass(frozen=True)
class Firing:
    """A planned run, ready to be sent in a batch by :meth:`SchedulerOps.fire`."""

    grant: Grant
    plan: Plan
    args: tuple[Arg, ...]  # its part of the fire script's arguments


@dataclass(frozen=True)
class Snapshot:
    """Schedules and scheduler instances as stored (each instance's record with ``age``
    and ``live`` added, see :func:`instance_view`)."""

    schedules: list[ScheduleInfo]
    instances: dict[str, dict[str, Any]]
    now: int


def instance_view(record: dict[str, Any], now: int) -> dict[str, Any]:
    """An instance's record as seen at server time ``now`` (us): ``age`` (s since its
    last heartbeat), ``live`` (running and beating within
    :func:`~fairque.scheduler.config.live_window` of its poll interval), and ``state``
    ``stale`` for an instance recorded as running that has stopped beating (killed, or
    cut off from the server)."""
    age = max(0.0, (now - int(record.get("seen_at", 0))) / MICROS)
    running = record.get("state") == "running"
    live = running and age <= live_window(float(record.get("poll_interval", 1.0)))
    state = "stale" if running and not live else record.get("state")
    return {**record, "state": state, "age": age, "live": live}


def _seconds(micros: Any) -> float | None:
    return None if micros is None else int(micros) / MICROS


def _info(
    schedule_id: str, definition: bytes, packed: bytes, stored_next: bytes | None
) -> ScheduleInfo:
    status: dict[str, Any] = decode(packed)
    return ScheduleInfo(
        schedule_id=schedule_id,
        schedule=Schedule.model_validate(decode(definition)),
        state=ScheduleState(status["state"]),
        next_run=None if stored_next is None else float(stored_next) / MICROS,
        version=status["v"],
        runs=status["runs"],
        skipped=status["skipped"],
        failures=status["failures"],
        last_run=_seconds(status.get("last_run")),
        last_submitted_at=_seconds(status.get("last_submitted_at")),
        last_task_id=status.get("last_task_id"),
        last_error=status.get("last_error"),
    )


def _parse_snapshot(reply: list[Any]) -> Snapshot:
    rows, instances, now = reply
    schedules = [
        _info(rows[i].decode(), rows[i + 1], rows[i + 2], rows[i + 3])
        for i in range(0, len(rows), 4)
    ]
    records = {
        instances[i].decode(): instance_view(decode(instances[i + 1]), int(now))
        for i in range(0, len(instances), 2)
    }
    return Snapshot(schedules, records, int(now))


class SchedulerOps:
    """Builds the scheduler's calls in one queue namespace."""

    def __init__(self, namespace: Namespace) -> None:
        self.namespace = namespace

    def _call(
        self, name: str, args: Sequence[Arg], parse: Callable[[Any], T], locking: str | None = None,
        locks: Iterable[str] = (),
    ) -> Call[T]:  # fmt: skip
        """A scheduler script's call; ``locking`` names the schedule whose lock it uses,
        ``locks`` those of a script acting on many schedules (its variadic keys)."""
        params = None if locking is None else {"id": locking}
        return self.namespace.call(f"scheduler/{name}", args, parse, params, locks)

    def maintain(self, interval: float) -> Call[Maintenance]:
        """A maintenance round of the namespace if one is due (see ``FairQueue.maintain``):
        a scheduler tidies the namespace it submits to, as workers do."""
        return maintenance.maintain(self.namespace, None, interval)

    def save(
        self,
        schedule: Schedule,
        now: int,
        mode: Literal["add", "update"],
        expected_version: int | None = None,
    ) -> Call[str]:
        """Stores ``schedule`` (its id given, or generated for an add); parses to the id."""
        schedule_id = schedule.schedule_id or new_schedule_id()
        schedule = anchored(schedule, now).model_copy(update={"schedule_id": schedule_id})
        definition = encode(schedule.model_dump(mode="json"), "schedule", _MAX_DEFINITION_BYTES)
        expected = "" if expected_version is None else expected_version
        args = (schedule_id, mode, definition, next_run(schedule, now), expected)
        return self._call("save", args, lambda _version: schedule_id)

    def remove(self, schedule_id: str) -> Call[bool]:
        """Deletes a schedule; parses to whether it existed."""
        return self._call("remove", (schedule_id,), bool)

    def pause(self, schedule_id: str) -> Call[ScheduleState]:
        """Stops a schedule's runs until it is resumed."""
        return self._call("pause", (schedule_id, "pause", ""), _state)

    def resume(self, info: ScheduleInfo, now: int) -> Call[ScheduleState]:
        """Makes a paused or failed schedule active; its next run is the first after now."""
        after = next_run(info.schedule, now)
        return self._call("pause", (info.schedule_id, "resume", after), _state)

    def read(self, schedule_ids: Sequence[str] | None = None) -> Call[Snapshot]:
        """The schedules ``schedule_ids`` (None: all) and the instances."""
        args = ("all",) if schedule_ids is None else ("some", *schedule_ids)
        return self._call("read", args, _parse_snapshot)

    def record(self, instance: str, record: dict[str, Any], ttl: float) -> Call[None]:
        """Records an instance's state (e.g. stopped), kept ``ttl`` seconds."""
        packed = encode(record, "record", _MAX_DEFINITION_BYTES)
        args = (instance, packed, round(ttl * MICROS))
        return self._call("instance", args, lambda _reply: None)

    def claim(
        self, instance: str, record: dict[str, Any], token: str, config: SchedulerConfig
    ) -> Call[Claim]:
        """Records the instance's heartbeat (the record expires ``config.instance_ttl``
        seconds after it unless renewed) and locks at most ``config.batch`` due schedules
        that no other instance holds, with ``token`` for ``config.lock_timeout`` seconds;
        parses to a :class:`Claim`."""
        packed = encode(record, "record", _MAX_DEFINITION_BYTES)
        ttl = round(config.instance_ttl * MICROS)
        lifetime = max(1, math.ceil(config.lock_timeout * 1000))
        args = (instance, packed, ttl, config.batch, token, lifetime)

        def parse(reply: list[Any]) -> Claim:
            now, flat, busy, earliest = reply
            grants = []
            for i in range(0, len(flat), 4):
                status = decode(flat[i + 3])
                grants.append(
                    Grant(flat[i].decode(), token, int(now), flat[i + 1], flat[i + 2],
                          status["v"], status.get("pending_run"))
                )  # fmt: skip
            return Claim(int(now), grants, int(busy), None if earliest < 0 else int(earliest))

        return self._call("claim", args, parse)

    def firing(self, grant: Grant) -> Firing:
        """Plans the run of a claimed schedule and builds its part of a :meth:`fire` call;
        raises :class:`FairQueueError` if the run cannot be built (an unreadable
        definition, a task the queue refuses)."""
        plan = plan_run(grant)
        if plan.submit:
            call = push.push(self.namespace, [grant.schedule.task.build(plan.task_id)])
            row, payload = call.args[-2:]  # the push's count, row, payload
        else:
            row, payload = b"", b""
        planned = (grant.schedule_id, grant.token, grant.version, grant.next_run, plan.run_at)
        return Firing(grant, plan, (*planned, plan.following, row, payload))

    def fire(self, firings: Sequence[Firing]) -> Call[list[int | FairQueueError | None]]:
        """Submits the planned runs (skipped ones are not), moves each schedule on and
        releases its lock, in one call; parses to one outcome per run: the server time of
        submission, None if the plan was stale, or the error that refused the submission
        (the lock is then still held, for :meth:`failed`)."""
        if not firings:
            raise InvalidInput("firings", "must not be empty")
        args = [arg for firing in firings for arg in firing.args]

        def parse(reply: list[Any]) -> list[int | FairQueueError | None]:
            now, outcomes = reply
            return [
                int(now) if outcome == 1 else None if outcome == 0
                else from_script_error(outcome.decode())
                for outcome in outcomes
            ]  # fmt: skip

        ids = [firing.grant.schedule_id for firing in firings]
        return self._call("fire", args, parse, locks=ids)

    def failed(
        self, grant: Grant, run_at: int, error: str, config: SchedulerConfig
    ) -> Call[ScheduleState | None]:
        """Records a failed submission (retried with backoff, FAILED after the maximum)
        and releases the lock; parses to the schedule's state, None if the plan was stale."""
        planned = (grant.schedule_id, grant.token, grant.version, grant.next_run, run_at)
        args = (
            *planned, error[:4096], config.max_submit_retries,
            repr(config.retry_backoff_base), repr(config.retry_backoff_max),
        )  # fmt: skip
        return self._call("failed", args, lambda reply: _state(reply[0]) if reply else None,
            locking=grant.schedule_id,
        )  # fmt: skip

    def unlock(self, held: Mapping[str, str]) -> Call[int]:
        """Releases the locks ``held`` (schedule id -> token) that their tokens still own
        (compare-and-delete); parses to how many were released."""
        if not held:
            raise InvalidInput("held", "must not be empty")
        return self._call("unlock", list(held.values()), int, locks=held.keys())


def _state(reply: bytes) -> ScheduleState:
    return ScheduleState(reply.decode())


def check_update(info: ScheduleInfo, changes: dict[str, Any]) -> Schedule:
    """The schedule with ``changes`` applied, validated; the id cannot change."""
    if "schedule_id" in changes:
        raise InvalidInput("schedule_id", "cannot be changed; remove and add instead")
    current = info.schedule.model_dump()
    if "cron" in changes:
        current["interval"] = None  # switching from interval to cron
    if "interval" in changes:
        current["cron"] = None
    if {"cron", "interval", "timezone"} & changes.keys():
        # The start of the grid belongs to the old timing; the new one starts afresh.
        current["start_at"] = None
    return Schedule.model_validate({**current, **changes})
