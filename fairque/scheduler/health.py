"""The scheduler's health check: OK, WARNING or ERROR, with the details it is based on.

It judges what the server holds, so it is true from any process (``fairque scheduler
health`` runs no instance): the instances' records, each with its last heartbeat in
server time (live = running and beating within ``live_window`` of its poll interval, see
:mod:`fairque.scheduler.config`), and the schedules. An instance running in the same
process adds what only it knows: the age of its last cycle and its recent error rate.

ERROR (critical): the server does not answer; or schedules are active and
no instance is live, so nothing submits their runs (the scheduler's one job is not being
done, as surely as with the server gone); or this process's running instance has not
completed a cycle for ``stale_cycles_error`` polls, or half its recent submissions
failed. WARNING (degraded, the runs still go out): a stale instance (recorded as running,
no longer beating: killed, or cut off from the server), a FAILED schedule, a slow cycle
or a raised error rate in this process's instance.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from fairque.scheduler.config import SchedulerConfig
from fairque.scheduler.metrics import SchedulerMetrics
from fairque.scheduler.models import Health, HealthStatus, ScheduleState
from fairque.scheduler.ops import Snapshot


@dataclass
class _Findings:
    details: dict[str, Any]
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def assess(
    metrics: SchedulerMetrics,
    config: SchedulerConfig,
    snapshot: Snapshot | None,
    address: str = "",
    now: float | None = None,
) -> Health:
    """Judges the schedules and their instances from ``snapshot`` (None: the server at
    ``address`` did not answer), and the instance running here from ``metrics``."""
    found = _Findings({"server_reachable": snapshot is not None, "running": metrics.running})
    if snapshot is None:
        found.errors.append(f"the server at {address} does not answer" if address
                            else "the server does not answer")  # fmt: skip
    else:
        _judge_stored(snapshot, found)
    _judge_local(metrics, config, time.monotonic() if now is None else now, found)
    found.details.update(metrics.summary())
    status = (HealthStatus.ERROR if found.errors else HealthStatus.WARNING if found.warnings
              else HealthStatus.OK)  # fmt: skip
    return Health(status, found.details, tuple(found.errors + found.warnings))


def _judge_stored(snapshot: Snapshot, found: _Findings) -> None:
    schedules = snapshot.schedules
    active = sum(info.state is ScheduleState.ACTIVE for info in schedules)
    broken = [info.schedule_id for info in schedules if info.state is ScheduleState.FAILED]
    instances = snapshot.instances
    live = sorted(name for name, record in instances.items() if record["live"])
    stale = sorted(name for name, record in instances.items() if record["state"] == "stale")
    found.details.update(
        schedules=len(schedules), active_schedules=active, failed_schedules=broken,
        live_instances=live, stale_instances=stale,
        instances={name: {key: record.get(key) for key in _SHOWN}
                   for name, record in instances.items()},
    )  # fmt: skip
    if active and not live:
        found.errors.append(f"{active} active schedule(s) and no live scheduler instance: "
                            "no runs are being submitted")  # fmt: skip
    for name in stale:
        age = instances[name]["age"]
        found.warnings.append(f"instance {name} stopped beating {age:.1f} s ago (killed?)")
    if broken:
        found.warnings.append(f"{len(broken)} schedule(s) failed: {', '.join(broken[:10])}")


_SHOWN = ("state", "age", "host", "pid", "submitted", "failed")  # of each instance


def _judge_local(
    metrics: SchedulerMetrics, config: SchedulerConfig, now: float, found: _Findings
) -> None:
    if metrics.running:
        age = None if metrics.last_cycle is None else now - metrics.last_cycle
        found.details["last_cycle_age"] = age
        if age is None or age > config.stale_cycles_error * config.poll_interval:
            found.errors.append(f"no scheduler cycle completed for {age or 0:.1f} s")
        elif age > config.stale_cycles_warning * config.poll_interval:
            found.warnings.append(f"the last scheduler cycle was {age:.1f} s ago")
    failed, total = metrics.error_rate(now)
    rate = failed / total if total else 0.0
    found.details["error_rate"] = rate
    found.details["recent_submissions"] = total
    if rate >= config.error_rate_error:
        found.errors.append(f"{failed} of {total} recent submissions failed")
    elif rate >= config.error_rate_warning:
        found.warnings.append(f"{failed} of {total} recent submissions failed")
