"""Task functions the HTTP worker tests run (imported by worker processes too)."""

from __future__ import annotations

import asyncio
import threading
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


# Runs of "exclusive" in this process: (label, start, end) by time.monotonic().
RUNS: list[tuple[str, float, float]] = []
_RUNS_LOCK = threading.Lock()


@task(name="exclusive")
def exclusive(label: str, seconds: float = 0.0, fail_once: str | None = None) -> str:
    """Runs ``seconds`` and records when; fails the first time if ``fail_once`` (a file
    it leaves behind) does not exist yet."""
    start = time.monotonic()
    failing = fail_once is not None and not Path(fail_once).exists()
    if failing:
        Path(str(fail_once)).write_text("failed once")
    time.sleep(seconds)
    with _RUNS_LOCK:
        RUNS.append((label, start, time.monotonic()))
    if failing:
        raise RuntimeError("the first run fails")
    return label
