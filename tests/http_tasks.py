"""Task functions the HTTP worker tests run (imported by worker processes too)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from fairque import task


@task(name="echo")
def echo(value: Any = None) -> Any:
    return value


@task(name="boom")
def boom(message: str = "boom") -> None:
    raise RuntimeError(message)


@task(name="nap")
async def nap(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


@task(name="once-slow")
def once_slow(marker: str) -> str:
    """Hangs on its first run (which leaves ``marker``), returns on the next."""
    path = Path(marker)
    if path.exists():
        return "second run"
    path.write_text("started")
    time.sleep(60)  # the test kills this worker long before
    return "first run"
