"""Task functions the worker benchmark runs (imported by ``fairque worker --tasks``)."""

from __future__ import annotations

import os
import time

from redis.asyncio import Redis

from fairque import task


@task(name="noop")
async def noop() -> None:
    """Does nothing: the benchmark measures the queue and the worker, not the work."""


@task(name="started_at")
async def started_at() -> float:
    """When the worker started running it (wall clock; same machine as the pusher)."""
    return time.time()


class _Client:
    """One Redis client per worker process, made on first use (on the worker's loop), with
    a connection for each task the benchmark's workers run at once (concurrency 200):
    redis-py's asyncio pool refuses a call over its limit (MaxConnectionsError)."""

    redis: Redis | None = None

    @classmethod
    def get(cls) -> Redis:
        if cls.redis is None:
            cls.redis = Redis.from_url(os.environ["FAIRQUE_REDIS_URL"], max_connections=256)
        return cls.redis


@task(name="one_call")
async def one_call() -> None:
    """Makes one Redis call of its own (an INCR), as real tasks do: the drain figure the
    issue asks for counts the worker's per-task path and the task's own round trip."""
    await _Client.get().incr("bench:one_call")
