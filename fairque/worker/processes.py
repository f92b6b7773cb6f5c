"""``fairque worker --processes N``: N worker processes for CPU-bound task functions.

Each child is a whole :class:`Worker` with its own event loop and id (``<id>-<n>``); the
parent only forwards SIGTERM / SIGINT to them and waits, so every child hands its
unfinished tasks back on its own (and a second signal stops them at once). Children are
spawned, not forked, and import the task modules themselves, so nothing depends on state
copied from the parent.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import os
import signal
from collections.abc import Sequence
from types import FrameType
from typing import Any

from fairque.worker.config import WorkerConfig
from fairque.worker.runner import Worker


def _child(values: dict[str, Any], modules: Sequence[str]) -> None:
    # A spawned child starts with no logging set up: its stop line and its word about
    # an unreachable server go to stderr like the parent's.
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    # Out of the parent's process group: a terminal's Ctrl-C reaches the parent only, which
    # forwards it once. Reaching both, one Ctrl-C would count as two (a stop without grace).
    os.setpgrp()
    for module in modules:
        importlib.import_module(module)
    Worker(WorkerConfig.model_validate(values)).run()


def run_processes(config: WorkerConfig, count: int, modules: Sequence[str]) -> int:
    """Runs ``count`` workers in child processes; returns 0 if all stopped cleanly."""
    spawn = multiprocessing.get_context("spawn")
    children = [
        spawn.Process(
            target=_child,
            args=(config.model_copy(update={"id": f"{config.id}-{n}"}).model_dump(), modules),
            name=f"fairque-worker-{n}",
        )
        for n in range(1, count + 1)
    ]

    def forward(signum: int, _frame: FrameType | None) -> None:
        for child in children:
            if child.pid is not None and child.is_alive():
                os.kill(child.pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    for child in children:
        child.start()
    for child in children:
        child.join()
    return 0 if all(child.exitcode == 0 for child in children) else 1
