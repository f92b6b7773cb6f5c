"""Task functions shared by the producer and the consumer examples."""

from __future__ import annotations

import asyncio
import hashlib

from fairque import task


@task(name="examples.render_report")
async def render_report(user: str, pages: int) -> str:
    """An I/O-bound task: async functions run concurrently on the worker's event loop."""
    await asyncio.sleep(0.01 * pages)
    return f"report for {user}: {pages} pages"


@task(name="examples.checksum")
def checksum(text: str, rounds: int = 1000) -> str:
    """A blocking task: sync functions run on the worker's thread pool."""
    digest = text.encode()
    for _ in range(rounds):
        digest = hashlib.sha256(digest).digest()
    return digest.hex()
