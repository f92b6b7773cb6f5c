"""The calls of the live workers' registry: a worker's beat, its leaving, the list."""

from __future__ import annotations

from typing import Any

from fairque.engine.calls import Call, decode, encode
from fairque.engine.fields import MICROS
from fairque.engine.keys import Namespace
from fairque.queue.calls.checks import check_name, check_positive
from fairque.queue.models import (
    WorkerInfo,
)


def register_worker(namespace: Namespace, worker: WorkerInfo, ttl: float) -> Call[None]:
    """Registers (or keeps registered) a live worker for ``ttl`` seconds."""
    check_name(worker.worker_id, "worker_id")
    check_positive(ttl, "ttl", 3600.0)
    for name in worker.functions:
        check_name(name, "functions")
    record = {
        "id": worker.worker_id, "host": worker.host, "pid": worker.pid,
        "functions": list(worker.functions), "concurrency": worker.concurrency,
        "in_flight": worker.in_flight, "started_at": worker.started_at,
    }  # fmt: skip
    args = ("beat", worker.worker_id, encode(record, "worker", 1024 * 1024), int(ttl * MICROS))
    return namespace.call("queue/workers", args, lambda _reply: None)


def unregister_worker(namespace: Namespace, worker_id: str) -> Call[None]:
    """A worker that stops leaves the registry at once."""
    check_name(worker_id, "worker_id")
    return namespace.call("queue/workers", ("leave", worker_id), lambda _reply: None)


def workers(namespace: Namespace) -> Call[list[WorkerInfo]]:
    """The live workers, by id."""
    return namespace.call("queue/workers", ("list",), _parse_workers)


def _parse_workers(reply: list[Any]) -> list[WorkerInfo]:
    workers = []
    for packed in reply[1:]:
        record = decode(packed)
        workers.append(
            WorkerInfo(
                worker_id=record["id"],
                host=record["host"],
                pid=record["pid"],
                functions=tuple(record["functions"]),
                concurrency=record["concurrency"],
                in_flight=record["in_flight"],
                started_at=record["started_at"],
                seen_at=record["seen_at"] / MICROS,
            )
        )
    return sorted(workers, key=lambda worker: worker.worker_id)
