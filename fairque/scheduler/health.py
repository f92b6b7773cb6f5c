"""Seed 002's health check: OK, WARNING or ERROR, with the details it is based on."""

from __future__ import annotations

import time
from typing import Any

from fairque.scheduler.config import SchedulerConfig
from fairque.scheduler.metrics import SchedulerMetrics
from fairque.scheduler.models import Health, HealthStatus, ScheduleInfo, ScheduleState


def assess(
    metrics: SchedulerMetrics,
    config: SchedulerConfig,
    reachable: bool,
    schedules: list[ScheduleInfo],
    now: float | None = None,
) -> Health:
    """Judges an instance: the server must answer, a running instance must have cycled
    recently, and few recent submissions may have failed. Failed schedules warn."""
    now = time.monotonic() if now is None else now
    errors: list[str] = []
    warnings: list[str] = []
    details: dict[str, Any] = {"server_reachable": reachable, "running": metrics.running}
    if not reachable:
        errors.append("the server does not answer")
    if metrics.running:
        age = None if metrics.last_cycle is None else now - metrics.last_cycle
        details["last_cycle_age"] = age
        if age is None or age > config.stale_cycles_error * config.poll_interval:
            errors.append(f"no scheduler cycle completed for {age or 0:.1f} s")
        elif age > config.stale_cycles_warning * config.poll_interval:
            warnings.append(f"the last scheduler cycle was {age:.1f} s ago")
    failed, total = metrics.error_rate(now)
    rate = failed / total if total else 0.0
    details["error_rate"] = rate
    details["recent_submissions"] = total
    if rate >= config.error_rate_error:
        errors.append(f"{failed} of {total} recent submissions failed")
    elif rate >= config.error_rate_warning:
        warnings.append(f"{failed} of {total} recent submissions failed")
    broken = [info.schedule_id for info in schedules if info.state is ScheduleState.FAILED]
    details["schedules"] = len(schedules)
    details["failed_schedules"] = broken
    if broken:
        warnings.append(f"{len(broken)} schedule(s) failed: {', '.join(broken[:10])}")
    details.update(metrics.summary())
    status = HealthStatus.ERROR if errors else HealthStatus.WARNING if warnings else HealthStatus.OK
    return Health(status, details, tuple(errors + warnings))
