"""fairque in the benchmark of peers: its job, its worker command, its client calls.

Runs in the project's own environment, through the public API only.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from peers_job import Workers, arecord

from fairque import FairQueue, task

NAMESPACE = "peers"


@task(name="job")
async def job(entry: str) -> None:
    """The no-op job: one Redis call of its own (``driver.RECORD``)."""
    await arecord(entry)


class FairquePeer:
    name = "fairque"
    model = "asyncio, concurrency 10 per process (default); --processes N"
    enqueue_api = "FairQueue.push (sync)"
    bulk_api: str | None = "FairQueue.push_many (atomic)"
    fairness = "tenants are native: Task(user_id=tenant)"

    def __init__(self, url: str) -> None:
        from importlib.metadata import version  # not in the job's import path

        self.version = version("fairque")
        self.url = url
        self.queue = FairQueue(url, NAMESPACE)

    def prepare(self) -> None:
        """Nothing to declare."""

    def enqueue(self, entries: Sequence[str], tenant: str | None = None) -> None:
        user = tenant or "default"
        for entry in entries:
            self.queue.push(job.build(user_id=user, args=[entry]))

    def enqueue_bulk(self, entries: Sequence[str], tenant: str | None = None) -> None:
        user = tenant or "default"
        self.queue.push_many([job.build(user_id=user, args=[entry]) for entry in entries])

    def workers(self, processes: int, tenants: Sequence[str] | None = None) -> Workers:
        command = str(Path(sys.executable).parent / "fairque")
        return Workers(
            [
                [
                    command,
                    "worker",
                    "--tasks",
                    "peer_fairque",
                    "--url",
                    self.url,
                    "--namespace",
                    NAMESPACE,
                    "--processes",
                    str(processes),
                ]
            ]
        )

    def close(self) -> None:
        self.queue.close()


def make_peer(url: str) -> FairquePeer:
    return FairquePeer(url)
