"""Bounded waits for the asyncio loops (worker, scheduler, dispatcher, storage workers).

On Python 3.11+ they use ``asyncio.timeout``: no extra task per wait, and a cancellation
of the waiting task is never lost (``asyncio.wait_for`` can swallow one that arrives as
its timeout fires, python/cpython#86296, which left a cancelled loop running forever).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def within(work: Awaitable[T], seconds: float) -> T:
    """Awaits ``work``, cancelling it after ``seconds`` (asyncio.TimeoutError)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await work
    return await asyncio.wait_for(work, seconds)  # pragma: no cover - Python 3.10


async def wait_event(event: asyncio.Event, seconds: float) -> bool:
    """Waits until ``event`` is set or ``seconds`` have passed; True if it was set."""
    with contextlib.suppress(asyncio.TimeoutError):
        await within(event.wait(), seconds)
    return event.is_set()
