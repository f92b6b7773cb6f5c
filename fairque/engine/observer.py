"""What the runners report as they work: the :class:`Observer` interface.

The fair worker and the storage worker report task run times, cycles and what runs now
to an observer; :class:`fairque.metrics.Metrics` implements it (Prometheus). The runners
import only this interface, so nothing below the adapters imports the metrics.
"""

from __future__ import annotations

from typing import Protocol


class Observer(Protocol):
    """Receives the runners' reports. Every method returns at once."""

    def observe_task(self, name: str | None, succeeded: bool, seconds: float) -> None:
        """A fair-queue task function ran for ``seconds``."""

    def observe_cycle(self, queue_num: int, seconds: float, slow: bool) -> None:
        """A storage job processor took a batch of ``queue_num`` and handled it."""

    def observe_handled(self, queue_num: int, outcome: str, count: int) -> None:
        """A handler reported ``count`` tasks of ``outcome`` (processed, errors, retried)."""

    def observe_in_progress(self, queue_num: int, change: int) -> None:
        """Tasks handed to a handler (``change`` > 0) or returned by it (< 0)."""

    def observe_running(self, what: str, change: int) -> None:
        """A storage worker (``what`` = "workers") or one of its job processors
        ("job_processors") started (+1) or ended (-1)."""
