"""taskiq (with taskiq-redis) in the benchmark of peers: its job, its worker, its client calls.

Runs in its own venv (see run.py); the taskiq imports are invisible to the project's mypy.
taskiq has no sync client: the pushes are awaited one after the other on an event loop.
The broker is ``RedisStreamBroker``, the one taskiq-redis's README shows (acknowledged
deliveries); a fairness worker also reads one stream per tenant (``additional_streams``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from peers_job import Workers, arecord, tenants_listened, url
from taskiq_redis import RedisStreamBroker  # type: ignore[import-not-found]

broker = RedisStreamBroker(url=url(), additional_streams=dict.fromkeys(tenants_listened(), ">"))


@broker.task(task_name="job")  # type: ignore[untyped-decorator]
async def job(entry: str) -> None:
    """The no-op job: one Redis call of its own (``peers_job.RECORD``)."""
    await arecord(entry)


def all_tenants() -> list[str]:
    from driver import all_tenants

    return all_tenants()


class TaskiqPeer:
    name = "taskiq"
    model = "asyncio, up to 100 tasks per process (defaults); --workers N processes"
    enqueue_api = "await task.kiq (async only)"
    bulk_api: str | None = None
    fairness = "one stream per tenant, read together (RedisStreamBroker additional_streams)"

    def __init__(self, url: str) -> None:
        from importlib.metadata import version

        self.version = f"{version('taskiq')} (taskiq-redis {version('taskiq-redis')})"
        self.url = url
        self.loop = asyncio.new_event_loop()
        # The same broker, declaring the tenants' streams too, for the fairness pushes.
        self.tenant_broker = RedisStreamBroker(
            url=url, additional_streams=dict.fromkeys(all_tenants(), ">")
        )

    def prepare(self) -> None:
        """Declares the consumer groups (created at "$": before any push)."""
        self.loop.run_until_complete(broker.startup())
        self.loop.run_until_complete(self.tenant_broker.startup())

    def enqueue(self, entries: Sequence[str], tenant: str | None = None) -> None:
        async def push() -> None:
            if tenant is None:
                for entry in entries:
                    await job.kiq(entry)
            else:
                kicker = job.kicker().with_broker(self.tenant_broker).with_labels(queue_name=tenant)
                for entry in entries:
                    await kicker.kiq(entry)

        self.loop.run_until_complete(push())

    def enqueue_bulk(self, entries: Sequence[str], tenant: str | None = None) -> None:
        raise NotImplementedError

    def workers(self, processes: int, tenants: Sequence[str] | None = None) -> Workers:
        command = [
            str(Path(sys.executable).parent / "taskiq"),
            "worker",
            "peer_taskiq:broker",
            "--workers",
            str(processes),
        ]
        # An idle taskiq 0.13 worker does not exit on SIGTERM (its stream listener keeps
        # waiting for a message): the harness kills it 3 s later.
        return Workers([command], grace=3.0)

    def close(self) -> None:
        self.loop.run_until_complete(broker.shutdown())
        self.loop.run_until_complete(self.tenant_broker.shutdown())
        self.loop.close()


def make_peer(url: str) -> TaskiqPeer:
    return TaskiqPeer(url)
