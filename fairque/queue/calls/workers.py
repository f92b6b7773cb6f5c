"""The calls of the live workers' registry: a worker's beat, its leaving, the list."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fairque.engine.calls import Arg, Call, decode, encode
from fairque.engine.fields import MICROS
from fairque.engine.keys import Namespace
from fairque.queue.calls.checks import check_name, check_positive
from fairque.queue.calls.leases import (
    MAX_POP_WAIT,
    Leased,
    checked_names,
    parse_leased,
    pop_args,
    wait_for_work,
)
from fairque.queue.models import (
    WorkerInfo,
    WorkerUpkeep,
)


def register_worker(namespace: Namespace, worker: WorkerInfo, ttl: float) -> Call[None]:
    """Registers (or keeps registered) a live worker for ``ttl`` seconds."""
    args = ("beat", worker.worker_id, _record(worker, ttl), int(ttl * MICROS))
    return namespace.call("queue/workers", args, lambda _reply: None)


def upkeep(
    namespace: Namespace,
    worker: WorkerInfo,
    ttl: float,
    *,
    rewrite: bool,
    longest_wait: float | None,
    names: Sequence[str] | None,
    round_interval: float | None = None,
) -> Call[WorkerUpkeep]:
    """A worker's upkeep (``queue/upkeep.lua``): keeps it registered for ``ttl`` seconds
    (its record written if it was not registered, or with ``rewrite``), runs the
    namespace's maintenance round if one is due (rounds ``round_interval`` seconds apart;
    None: none is run, and ``round_due`` says whether one is due), and tells when work
    comes due and whether a lane of its task ``names`` (None: any) may be served now. The
    worker then waits until work comes due, ``longest_wait`` seconds at most (None: a busy
    worker, which does not wait): work added meanwhile that comes due sooner wakes it.
    With ``round_interval``, ``round_due`` says that the round run hit its bound (another
    is due at once)."""
    wait: Arg = ""
    if longest_wait is not None:
        check_positive(longest_wait, "longest_wait", 3600.0)
        wait = int(longest_wait * MICROS)
    interval: Arg = ""
    if round_interval is not None:
        check_positive(round_interval, "round_interval", 3600.0)
        interval = int(round_interval * MICROS)
    record = _record(worker, ttl)
    args: list[Arg] = [worker.worker_id, record, int(ttl * MICROS), int(rewrite),
                       wait, interval, *checked_names(names)]  # fmt: skip

    def parse(reply: list[int]) -> WorkerUpkeep:
        due = int(reply[1])
        return WorkerUpkeep(
            registered=bool(reply[0]),
            next_due=None if due < 0 else due / MICROS,
            ready=bool(reply[2]),
            round_due=bool(reply[3]),
        )

    return namespace.call("queue/upkeep", args, parse)


def idle_pop(
    namespace: Namespace,
    wait: float,
    count: int,
    *,
    worker_id: str,
    ttl: float,
    longest_wait: float,
    round_interval: float,
    lease_seconds: float | None,
    names: Sequence[str] | None,
) -> Call[tuple[Leased, WorkerUpkeep | None]]:
    """An idle worker's wait for work, up to ``wait`` seconds, and the call behind it
    (``queue/idle_pop.lua``): a pop of up to ``count`` tasks of its task ``names`` (None:
    any) as :func:`~fairque.queue.calls.leases.pop` with a wait, which when it leases
    nothing is also the worker's :func:`upkeep` for its next wait (its registration's
    expiry moved to ``ttl`` seconds from now if it is registered; ``longest_wait``
    seconds at most) and the namespace's maintenance round if one is due (rounds
    ``round_interval`` seconds apart). Parses to the tasks leased, and the upkeep if it
    was made: its ``registered`` False says that the worker is not registered (make an
    :func:`upkeep`), its ``round_due`` that the round hit its bound (another is due at
    once), and its ``ready`` is False (the pop took any work there was)."""
    served = checked_names(names)
    check_positive(wait, "wait", MAX_POP_WAIT)
    check_positive(ttl, "ttl", 3600.0)
    check_positive(longest_wait, "longest_wait", 3600.0)
    check_positive(round_interval, "round_interval", 3600.0)
    popping = pop_args(count, None, None, worker_id, lease_seconds, served=served)
    args: list[Arg] = [int(ttl * MICROS), int(longest_wait * MICROS),
                       int(round_interval * MICROS), *popping]  # fmt: skip

    def parse(reply: list[Any]) -> tuple[Leased, WorkerUpkeep | None]:
        leased = parse_leased(reply[4:])
        if not reply[0]:
            return leased, None
        due = int(reply[2])
        upkept = WorkerUpkeep(
            registered=bool(reply[1]),
            next_due=None if due < 0 else due / MICROS,
            ready=False,
            round_due=bool(reply[3]),
        )
        return leased, upkept

    call = namespace.call("queue/idle_pop", args, parse)
    return call.after(wait_for_work(namespace, served, wait))


def _record(worker: WorkerInfo, ttl: float) -> bytes:
    """A worker's registry record (MessagePack), checked."""
    check_name(worker.worker_id, "worker_id")
    check_positive(ttl, "ttl", 3600.0)
    for name in worker.functions:
        check_name(name, "functions")
    record = {
        "id": worker.worker_id, "host": worker.host, "pid": worker.pid,
        "functions": list(worker.functions), "concurrency": worker.concurrency,
        "in_flight": worker.in_flight, "started_at": worker.started_at,
    }  # fmt: skip
    return encode(record, "worker", 1024 * 1024)


def unregister_worker(namespace: Namespace, worker_id: str) -> Call[None]:
    """A worker that stops leaves the registry at once."""
    check_name(worker_id, "worker_id")
    return namespace.call("queue/workers", ("leave", worker_id), lambda _reply: None)


def workers(namespace: Namespace) -> Call[list[WorkerInfo]]:
    """The live workers, by id."""
    return namespace.call("queue/workers", ("list",), _parse_workers)


def _parse_workers(reply: list[Any]) -> list[WorkerInfo]:
    workers = []
    for packed, expiry in zip(reply[1::2], reply[2::2], strict=True):
        record = decode(packed)
        seen_at = record["seen_at"]
        if "ttl" in record:  # an upkeep moves only the expiry: seen ttl before it
            seen_at = max(seen_at, int(expiry) - record["ttl"])
        workers.append(
            WorkerInfo(
                worker_id=record["id"],
                host=record["host"],
                pid=record["pid"],
                functions=tuple(record["functions"]),
                concurrency=record["concurrency"],
                in_flight=record["in_flight"],
                started_at=record["started_at"],
                seen_at=seen_at / MICROS,
            )
        )
    return sorted(workers, key=lambda worker: worker.worker_id)
