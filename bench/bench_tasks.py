"""Task functions the worker benchmark runs (imported by ``fairque worker --tasks``)."""

from __future__ import annotations

import time

from fairque import task


@task(name="noop")
async def noop() -> None:
    """Does nothing: the benchmark measures the queue and the worker, not the work."""


@task(name="started_at")
async def started_at() -> float:
    """When the worker started running it (wall clock; same machine as the pusher)."""
    return time.time()
