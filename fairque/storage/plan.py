"""What workers and the Manager exchange through the storage's server (the Manager
across processes and hosts).

Every storage keeps a small board next to its queues:

- ``beat(report, ttl)``: a worker says it is alive, with what it serves and what it did
  (a :class:`WorkerReport`), for ``ttl`` seconds; the reply is its part of the plan (the
  queue each of its processors should serve), or None when the Manager gave it none.
- ``workers()``: the reports of the workers whose beat has not expired. A worker that
  stops beating drops out of the registry and of the plan.
- ``publish_plan({worker_id: [queue, ...]})``: the Manager replaces the plan; workers
  that are no longer alive are left out.
- ``read_plan()``: the plan as stored (for the CLI and tests).

The server keeps reports as opaque MessagePack bytes (this module's codec) and expires
them by its own clock, so workers on hosts with skewed clocks still expire on time.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Mapping, Sequence

import msgspec

from fairque.errors import InvalidInput
from fairque.storage.models import check_queue_num

MAX_TTL = 24 * 3600.0  # seconds a beat may keep a worker registered
MAX_WORKER_ID = 200  # characters
MAX_PLAN = 1024  # processors per worker, as StorageWorkerConfig.max_processors


class QueueReport(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    """One queue a worker serves: its batch size, and the handlers' totals so far."""

    batch_size: int
    handled: int = 0  # tasks the handlers reported (processed, errors, retried)
    seconds: float = 0.0  # handler time those took


class WorkerReport(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    """A worker's beat: who it is, the queues it has handlers for, what it follows now."""

    worker_id: str
    processors: int
    queues: dict[int, QueueReport]
    plan: list[int] = msgspec.field(default_factory=list)  # pinned queue per processor
    host: str = ""
    pid: int = 0


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(WorkerReport)
_plan_decoder = msgspec.msgpack.Decoder(list[int])


def new_worker_id() -> str:
    """host-pid-random: unique, and says where the worker runs."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


def check_worker_id(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_WORKER_ID:
        raise InvalidInput("worker_id", f"must be a string of 1 to {MAX_WORKER_ID} characters")
    return value


def check_ttl(seconds: object) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise InvalidInput("ttl", f"must be a number of seconds, got {seconds!r}")
    if not 0 < seconds <= MAX_TTL:
        raise InvalidInput("ttl", f"must be above 0 and at most {MAX_TTL:g} s, got {seconds!r}")
    return float(seconds)


def check_queues(queues: object) -> list[int]:
    """One worker's plan: a queue number per processor."""
    if isinstance(queues, (str, bytes)) or not isinstance(queues, Sequence):
        raise InvalidInput("plan", f"must be a list of queue numbers, got {queues!r}")
    if len(queues) > MAX_PLAN:
        raise InvalidInput("plan", f"at most {MAX_PLAN} processors per worker")
    return [check_queue_num(queue) for queue in queues]


def check_plan(plan: Mapping[str, Sequence[int]]) -> dict[str, list[int]]:
    if not isinstance(plan, Mapping):
        raise InvalidInput("plan", f"must map worker ids to queue lists, got {plan!r}")
    return {check_worker_id(worker): check_queues(queues) for worker, queues in plan.items()}


def check_report(report: WorkerReport) -> WorkerReport:
    if not isinstance(report, WorkerReport):
        raise InvalidInput("report", f"expected WorkerReport, got {type(report).__name__}")
    check_worker_id(report.worker_id)
    for queue in report.queues:
        check_queue_num(queue)
    return report


def encode_report(report: WorkerReport) -> bytes:
    return _encoder.encode(check_report(report))


def decode_reports(blobs: Sequence[bytes]) -> list[WorkerReport]:
    """The reports, sorted by worker id; a blob this version cannot read is skipped (a
    worker of another fairque version beats with the same registry)."""
    reports = [report for report in map(_decode_report, blobs) if report is not None]
    return sorted(reports, key=lambda report: report.worker_id)


def _decode_report(blob: bytes) -> WorkerReport | None:
    try:
        return _decoder.decode(blob)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def encode_queues(queues: Sequence[int]) -> bytes:
    return _encoder.encode(list(queues))


def decode_queues(blob: bytes) -> list[int]:
    return _plan_decoder.decode(blob)
