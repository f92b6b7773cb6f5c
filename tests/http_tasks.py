"""Task functions the HTTP worker tests run (imported by worker processes too)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

from fairque import task
from fairque.http.context import JobContext, SyncJobContext


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


@task(name="counting")
async def counting(steps: int, context: JobContext) -> int:
    for step in range(1, steps + 1):
        await context.log(f"step {step}")
        await context.progress(100 * step / steps, f"{step} of {steps}")
    return steps


@task(name="counting_sync")
def counting_sync(steps: int, context: SyncJobContext) -> int:
    for step in range(1, steps + 1):
        context.log(f"step {step}", "and a second line")
        context.progress(step, "done" if step == steps else "")
    return steps


# For "outlived": set when its run starts; set by the test once the job's lease is gone;
# what its report met.
OUTLIVED_STARTED = threading.Event()
OUTLIVED = threading.Event()
LATE_REPORTS: list[Exception] = []


@task(name="outlived")
def outlived(context: SyncJobContext) -> None:
    """Outlives its timeout (the master fails the job and its lease ends), then reports."""
    OUTLIVED_STARTED.set()
    OUTLIVED.wait(30)
    try:
        context.progress(99, "too late")
    except Exception as exc:  # the test checks which: LeaseLost
        LATE_REPORTS.append(exc)
