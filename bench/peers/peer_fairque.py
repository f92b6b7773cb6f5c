"""fairque in the benchmark of peers: its job, its worker command, its client calls.

Runs in the project's own environment, through the public API only.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from peers_job import Workers, arecord, spread

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
        self.spread = spread()
        self.pushed = 0

    def prepare(self) -> None:
        """Nothing to declare."""

    def users(self, count: int, tenant: str | None) -> list[str]:
        """``tenant`` for each job; without one, "default", or round-robin over
        ``PEERS_SPREAD`` tenants where that is set."""
        if tenant or not self.spread:
            return [tenant or "default"] * count
        first, self.pushed = self.pushed, self.pushed + count
        return [f"t{(first + i) % self.spread}" for i in range(count)]

    def enqueue(self, entries: Sequence[str], tenant: str | None = None) -> None:
        for entry, user in zip(entries, self.users(len(entries), tenant), strict=True):
            self.queue.push(job.build(user_id=user, args=[entry]))

    def enqueue_bulk(self, entries: Sequence[str], tenant: str | None = None) -> None:
        users = self.users(len(entries), tenant)
        self.queue.push_many(
            [
                job.build(user_id=user, args=[entry])
                for entry, user in zip(entries, users, strict=True)
            ]
        )

    def workers(
        self, processes: int, tenants: Sequence[str] | None = None, concurrency: int | None = None
    ) -> Workers:
        command = [str(Path(sys.executable).parent / "fairque"), "worker", "--tasks",
                   "peer_fairque", "--url", self.url, "--namespace", NAMESPACE,
                   "--processes", str(processes)]  # fmt: skip
        if concurrency is not None:
            command += ["--concurrency", str(concurrency)]
        return Workers([command])

    def close(self) -> None:
        self.queue.close()


def make_peer(url: str) -> FairquePeer:
    return FairquePeer(url)
