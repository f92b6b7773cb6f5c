"""RQ in the benchmark of peers: its job, its worker command, its client calls.

Runs in its own venv (see run.py); the RQ imports are invisible to the project's mypy.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from peers_job import Workers, record
from redis import Redis
from rq import Queue  # type: ignore[import-not-found]

QUEUE = "default"


def job(entry: str) -> None:
    """The no-op job: one Redis call of its own (``driver.RECORD``)."""
    record(entry)


class RqPeer:
    name = "rq"
    model = "1 job at a time per worker, each in a forked work horse (rq.Worker, default)"
    enqueue_api = "Queue.enqueue"
    bulk_api: str | None = "Queue.enqueue_many (one pipeline)"
    fairness = "one queue per tenant, rq worker --dequeue-strategy round_robin"

    def __init__(self, url: str) -> None:
        from importlib.metadata import version  # not in the job's import path

        self.version = version("rq")
        self.url = url
        self.redis = Redis.from_url(url)
        self.queues: dict[str, Queue] = {}

    def queue(self, tenant: str | None) -> Queue:
        name = tenant or QUEUE
        if name not in self.queues:
            self.queues[name] = Queue(name, connection=self.redis)
        return self.queues[name]

    def prepare(self) -> None:
        """Nothing to declare."""

    def enqueue(self, entries: Sequence[str], tenant: str | None = None) -> None:
        queue = self.queue(tenant)
        for entry in entries:
            queue.enqueue(job, entry)

    def enqueue_bulk(self, entries: Sequence[str], tenant: str | None = None) -> None:
        queue = self.queue(tenant)
        queue.enqueue_many([Queue.prepare_data(job, args=(entry,)) for entry in entries])

    def workers(self, processes: int, tenants: Sequence[str] | None = None) -> Workers:
        rq = str(Path(sys.executable).parent / "rq")
        command = [rq, "worker", "--url", self.url]
        if tenants:
            command += ["--dequeue-strategy", "round_robin", *tenants]
        else:
            command.append(QUEUE)
        return Workers([command] * processes)  # one `rq worker` per process

    def close(self) -> None:
        self.redis.close()


def make_peer(url: str) -> RqPeer:
    return RqPeer(url)
