"""arq in the benchmark of peers: its job, its worker command, its client calls.

Runs in its own venv (see run.py); the arq imports are invisible to the project's mypy.
arq has no sync client: the pushes are awaited one after the other on an event loop.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arq import create_pool  # type: ignore[import-not-found]
from arq.connections import RedisSettings  # type: ignore[import-not-found]
from peers_job import Workers, arecord, url


async def job(ctx: dict[str, Any], entry: str) -> None:
    """The no-op job: one Redis call of its own (``peers_job.RECORD``)."""
    await arecord(entry)


class WorkerSettings:
    """What ``arq peer_arq.WorkerSettings`` runs (defaults otherwise)."""

    functions = (job,)
    redis_settings = RedisSettings.from_dsn(url())


class ArqPeer:
    name = "arq"
    model = "asyncio, max_jobs 10, polls every 0.5 s (defaults); one `arq` per process"
    enqueue_api = "await ArqRedis.enqueue_job (async only)"
    bulk_api: str | None = None
    fairness = "none: a worker serves one queue, so one FIFO queue"

    def __init__(self, url: str) -> None:
        from importlib.metadata import version

        self.version = version("arq")
        self.url = url
        self.loop = asyncio.new_event_loop()
        self.pool = self.loop.run_until_complete(create_pool(RedisSettings.from_dsn(url)))

    def prepare(self) -> None:
        """Nothing to declare."""

    def enqueue(self, entries: Sequence[str], tenant: str | None = None) -> None:
        async def push() -> None:
            for entry in entries:
                await self.pool.enqueue_job("job", entry)

        self.loop.run_until_complete(push())

    def enqueue_bulk(self, entries: Sequence[str], tenant: str | None = None) -> None:
        raise NotImplementedError

    def workers(self, processes: int, tenants: Sequence[str] | None = None) -> Workers:
        command = [str(Path(sys.executable).parent / "arq"), "peer_arq.WorkerSettings"]
        return Workers([command] * processes)  # one `arq` per process

    def close(self) -> None:
        self.loop.run_until_complete(self.pool.aclose())
        self.loop.close()


def make_peer(url: str) -> ArqPeer:
    return ArqPeer(url)
