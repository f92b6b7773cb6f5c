"""No-op tasks for fairque's idle workers in instructions.py: ``noop0`` .. ``noop<N-1>``,
N from ``PEERS_NOOP_NAMES`` (1 where unset), so that one module serves a worker of one
task name and one of several."""

from __future__ import annotations

import os

from fairque import task

NAMES_VARIABLE = "PEERS_NOOP_NAMES"


def names() -> list[str]:
    return [f"noop{index}" for index in range(int(os.environ.get(NAMES_VARIABLE, "1")))]


async def noop() -> None:
    """Does nothing: the idle worker's warm-up runs it."""


for _name in names():
    task(name=_name)(noop)
