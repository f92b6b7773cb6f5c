"""The performance metrics of one scheduler instance, kept in process.

Submission latency is from a run's due time to the moment the server queued its task
(both server clock); lock time is the round trip that claims a cycle's locks (one batch of
due schedules). A summary is also
stored with the instance's record in the server at every cycle.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

SAMPLES = 1000  # latencies and lock times kept for percentiles
RATE_WINDOW = 60.0  # submissions per minute are counted over this many seconds
ERROR_WINDOW = 300.0  # the error rate of health_check() looks this far back


def _percentile(samples: deque[float], fraction: float) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@dataclass
class SchedulerMetrics:
    """Counters and recent samples; ``clock`` is monotonic seconds."""

    submitted: int = 0  # runs queued
    skipped: int = 0  # missed runs dropped by MissedRuns.SKIP
    failed: int = 0  # submissions that failed (each is retried with backoff)
    lock_busy: int = 0  # due schedules whose lock another instance held
    stale: int = 0  # runs another instance had already handled when this one fired
    cycles: int = 0
    outages: int = 0  # times the server was found unreachable
    running: bool = False
    last_cycle: float | None = None  # monotonic time of the last completed cycle
    last_cycle_at: float | None = None  # the same, in epoch seconds (for alerts)
    latency: deque[float] = field(default_factory=lambda: deque(maxlen=SAMPLES))
    lock_time: deque[float] = field(default_factory=lambda: deque(maxlen=SAMPLES))
    _outcomes: deque[tuple[float, bool]] = field(default_factory=deque)  # (when, ok)

    def _outcome(self, ok: bool, now: float) -> None:
        self._outcomes.append((now, ok))
        while self._outcomes and self._outcomes[0][0] < now - ERROR_WINDOW:
            self._outcomes.popleft()

    def submission(self, latency: float, now: float | None = None) -> None:
        self.submitted += 1
        self.latency.append(latency)
        self._outcome(True, time.monotonic() if now is None else now)

    def failure(self, now: float | None = None) -> None:
        self.failed += 1
        self._outcome(False, time.monotonic() if now is None else now)

    def per_minute(self, now: float | None = None) -> int:
        """Submissions in the last minute."""
        since = (time.monotonic() if now is None else now) - RATE_WINDOW
        return sum(1 for when, ok in self._outcomes if ok and when >= since)

    def error_rate(self, now: float | None = None) -> tuple[int, int]:
        """(failed, all) submissions within the error window."""
        since = (time.monotonic() if now is None else now) - ERROR_WINDOW
        recent = [ok for when, ok in self._outcomes if when >= since]
        return recent.count(False), len(recent)

    def summary(self) -> dict[str, Any]:
        """Figures for the instance record, the CLI and health details."""
        return {
            "submitted": self.submitted,
            "skipped": self.skipped,
            "failed": self.failed,
            "lock_busy": self.lock_busy,
            "stale": self.stale,
            "cycles": self.cycles,
            "outages": self.outages,
            "submissions_per_minute": self.per_minute(),
            "latency_p50": _percentile(self.latency, 0.5),
            "latency_p99": _percentile(self.latency, 0.99),
            "lock_time_p50": _percentile(self.lock_time, 0.5),
            "lock_time_p99": _percentile(self.lock_time, 0.99),
        }
