"""The asyncio tests of this folder run on asyncio's own event loop and on uvloop, which
the worker runs on: their code drives a transport itself, and the two loops' transports
are not the same code."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {"asyncio": asyncio.new_event_loop}
try:
    import uvloop

    LOOPS["uvloop"] = uvloop.new_event_loop
except ImportError:  # pragma: no cover - PyPy and Windows, where uvloop is not installed
    pass


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    return LOOPS
