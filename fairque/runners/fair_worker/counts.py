"""What a worker counts of its work (:class:`~fairque.runners.fair_worker.runner.Worker`
gives them as its ``finished``, ``failed``, ``outages`` and ``handed_back``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Counts:
    """Counters that several parts of a worker add to."""

    finished: int = 0  # successes acknowledged
    failed: int = 0  # failures recorded
    outages: int = 0  # times the server was found unreachable
    handed_back: int = 0  # unfinished tasks released at the stop
