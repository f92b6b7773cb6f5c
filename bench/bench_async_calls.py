"""Client CPU per asyncio script call: redis-py's ``fcall`` against fairque's direct path
(``fairque.engine.async_direct``), on one throwaway embedded Valkey.

    uv run python bench/bench_async_calls.py [--calls 20000] [--repeat 3] [--loop uvloop]

Prints, never asserts: the client CPU time per call (``time.process_time()``) of
``--calls`` ``FCALL`` of a Lua function that does nothing, with 3 keys and 3 arguments
(one 100 bytes long), awaited one after another and by 10 coroutines at once, through
``redis.asyncio.Redis.fcall`` (a plain client) and through ``AsyncDirectCalls.command``
of the client fairque makes from a URL. The runs alternate in every round (which goes
first alternates too: this machine's speed swings within seconds); each round is
printed, then the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import redis
import redis.asyncio as aioredis
import uvloop

from fairque.engine.async_direct import async_direct_calls
from fairque.engine.connect import async_client
from fairque.servers.embedded import LocalServer

NOOP_LIBRARY = """#!lua name=bench_async_calls
redis.register_function('noop', function(keys, args) return 1 end)
"""
ARGUMENTS = ("noop", 3, "fq:{bench}:a", "fq:{bench}:b", "fq:{bench}:c", "x" * 100, 12345, "y")
AT_ONCE = 10

Call = Callable[[], Awaitable[Any]]


async def per_call(call: Call, calls: int, at_once: int) -> float:
    """Client CPU microseconds per call of ``calls``, made by ``at_once`` coroutines."""
    await call()  # connected: not what is measured

    async def one_after_another() -> None:
        for _ in range(calls // at_once):
            await call()

    started = time.process_time()
    await asyncio.gather(*(one_after_another() for _ in range(at_once)))
    return (time.process_time() - started) / calls * 1e6


async def redis_pys(url: str, calls: int, at_once: int) -> float:
    client = aioredis.Redis.from_url(url)
    try:
        return await per_call(lambda: client.fcall(*ARGUMENTS), calls, at_once)
    finally:
        await client.aclose()


async def direct(url: str, calls: int, at_once: int) -> float:
    client = async_client(url)
    sender = async_direct_calls(client)
    assert sender is not None
    try:
        return await per_call(lambda: sender.command("FCALL", *ARGUMENTS), calls, at_once)
    finally:
        await sender.close()
        await client.aclose()


PATHS = {"redis-py fcall": redis_pys, "direct": direct}


def bench(calls: int, repeat: int, loop: str) -> None:
    run = uvloop.run if loop == "uvloop" else asyncio.run
    with LocalServer() as server:
        admin = redis.Redis.from_url(server.url)
        admin.function_load(NOOP_LIBRARY, replace=True)
        admin.close()
        print(f"{loop}, {calls:,} calls per run, client CPU us per call")
        figures: dict[tuple[str, int], list[float]] = {}
        for round_ in range(1, repeat + 1):
            for at_once in (1, AT_ONCE):
                names = list(PATHS) if round_ % 2 else list(reversed(PATHS))
                for name in names:
                    usec = run(PATHS[name](server.url, calls, at_once))
                    figures.setdefault((name, at_once), []).append(usec)
                    line = f"round {round_}  {name:<15} {at_once:>2} at once {usec:7.2f}"
                    print(line, flush=True)
        print(f"\nmedians of {repeat} rounds")
        for (name, at_once), usecs in figures.items():
            print(f"{name:<15} {at_once:>2} at once {statistics.median(usecs):7.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls per run")
    parser.add_argument("--repeat", type=int, default=3, help="rounds (medians count)")
    parser.add_argument("--loop", choices=["asyncio", "uvloop"], default="uvloop")
    options = parser.parse_args()
    bench(options.calls, options.repeat, options.loop)


if __name__ == "__main__":
    main()
