"""Dramatiq in the benchmark of peers: its job, its worker command, its client calls.

Runs in its own venv (see run.py); the Dramatiq imports are invisible to the project's mypy.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import dramatiq  # type: ignore[import-not-found]
from dramatiq.brokers.redis import RedisBroker  # type: ignore[import-not-found]
from peers_job import Workers, record, tenants_listened, url

broker = RedisBroker(url=url())
dramatiq.set_broker(broker)
for _tenant in tenants_listened():  # the fairness run: one queue per tenant
    broker.declare_queue(_tenant)


@dramatiq.actor(actor_name="job")  # type: ignore[untyped-decorator]
def job(entry: str) -> None:
    """The no-op job: one Redis call of its own (``peers_job.RECORD``)."""
    record(entry)


class DramatiqPeer:
    name = "dramatiq"
    model = "8 threads per process (default --threads); --processes N"
    enqueue_api = "actor.send"
    bulk_api: str | None = None  # group(...).run() sends one message at a time
    fairness = "one queue per tenant (a consumer thread per queue)"

    def __init__(self, url: str) -> None:
        from importlib.metadata import version

        self.version = version("dramatiq")
        self.url = url

    def prepare(self) -> None:
        """Nothing to declare."""

    def enqueue(self, entries: Sequence[str], tenant: str | None = None) -> None:
        if tenant is None:
            for entry in entries:
                job.send(entry)
        else:
            for entry in entries:
                broker.enqueue(job.message(entry).copy(queue_name=tenant))

    def enqueue_bulk(self, entries: Sequence[str], tenant: str | None = None) -> None:
        raise NotImplementedError

    def workers(
        self, processes: int, tenants: Sequence[str] | None = None, concurrency: int | None = None
    ) -> Workers:
        command = [str(Path(sys.executable).parent / "dramatiq"), "peer_dramatiq",
                   "--processes", str(processes)]  # fmt: skip
        if concurrency is not None:
            command += ["--threads", str(concurrency)]
        return Workers([command])

    def close(self) -> None:
        broker.close()


def make_peer(url: str) -> DramatiqPeer:
    return DramatiqPeer(url)
