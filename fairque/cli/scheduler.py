"""``fairque scheduler``: manage schedules and run scheduler instances."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer

from fairque.cli.common import (
    HEALTH_PORT_OPTION,
    JSON_OPTION,
    LOG_FORMAT_OPTION,
    METRICS_PORT_OPTION,
    MONITORING_HOST_OPTION,
    NAMESPACE_OPTION,
    TENANT_NAMES,
    URL_OPTION,
    Typer,
    announce,
    console,
    fail,
    parse_json_list,
    parse_json_object,
    require_data,
    say,
    server_name,
    setup_logging,
)
from fairque.cli.listing import Listing, print_json, when
from fairque.cli.serving import serve_metrics, serve_probes, server_probe
from fairque.engine.outage import OUTAGE
from fairque.engine.routes import describe
from fairque.errors import FairQueueError
from fairque.metrics import Metrics
from fairque.runners.scheduler import TaskScheduler
from fairque.scheduler import HealthStatus, ScheduleInfo, SchedulerConfig

app = Typer(help="Cron and interval schedules, run by any number of instances.")

URL = URL_OPTION
NAMESPACE = NAMESPACE_OPTION
HEALTH_EXIT = {HealthStatus.OK: 0, HealthStatus.WARNING: 1, HealthStatus.ERROR: 2}


@contextmanager
def _scheduler(url: str | None, namespace: str, **config: Any) -> Iterator[TaskScheduler]:
    """A scheduler whose errors (an unreachable server too) end the command with a
    one-line message (exit 2)."""
    try:
        scheduler = TaskScheduler(url, namespace, config=SchedulerConfig(**config))
        try:
            yield scheduler
        except OUTAGE as exc:
            address = describe(scheduler.executor.route)
            raise FairQueueError(f"cannot reach the server at {address}: {exc}") from None
        finally:
            scheduler.close()
    except FairQueueError as exc:
        raise fail(str(exc)) from None


def _listing(schedules: list[ScheduleInfo]) -> Listing:
    listing = Listing(
        "schedules",
        ("id", "timing", "task", "state", "next run (UTC)", "runs", "failures"),
        right=("runs", "failures"),
    )
    for info in schedules:
        spec = info.schedule
        timing = f"{spec.cron} {spec.timezone}" if spec.cron else f"every {spec.interval:g} s"
        task = f"{spec.task.name} for {spec.task.user_id}"
        listing.add(info.schedule_id, timing, task, info.state.value, when(info.next_run),
                    info.runs, info.failures)  # fmt: skip
    return listing


def _template(
    name: str | None, user: str | None, priority: int | None, args: str | None, kwargs: str | None
) -> dict[str, Any]:
    given = {
        "name": name,
        "user_id": user,
        "priority": priority,
        "args": parse_json_list(args, "--args"),
        "kwargs": parse_json_object(kwargs, "--kwargs"),
    }
    return {key: value for key, value in given.items() if value is not None}


@app.command()
def add(
    task: str = typer.Option(..., "--task", metavar="NAME", help="Registered task function name."),
    user: str = typer.Option(..., *TENANT_NAMES, metavar="TENANT", help="Tenant of each run."),
    cron: str | None = typer.Option(
        None, "--cron", metavar="EXPR", help="Cron expression, e.g. '*/5 * * * *'."
    ),
    interval: float | None = typer.Option(
        None, "--interval", metavar="SECONDS", help="Or: seconds between runs."
    ),
    tz: str = typer.Option(
        "UTC", "--timezone", metavar="ZONE", help="Time zone of the cron expression."
    ),
    priority: int | None = typer.Option(
        None, "--priority", "-p", metavar="P", help="1 (low) .. 5 (high), 6 critical."
    ),
    args: str | None = typer.Option(
        None, "--args", metavar="JSON", help="JSON list of positional arguments."
    ),
    kwargs: str | None = typer.Option(
        None, "--kwargs", metavar="JSON", help="JSON object of keyword arguments."
    ),
    missed: str = typer.Option(
        "run_once", "--missed", metavar="POLICY", help="Missed runs: run_once or skip."
    ),
    schedule_id: str | None = typer.Option(
        None, "--id", metavar="ID", help="Schedule id (default: random)."
    ),
    url: str | None = URL,
    namespace: str = NAMESPACE,
) -> None:
    """Add a schedule and print its id."""
    fields: dict[str, Any] = {"cron": cron, "interval": interval, "timezone": tz, "missed": missed,
              "schedule_id": schedule_id,
              "task": _template(task, user, priority, args, kwargs)}  # fmt: skip
    with _scheduler(url, namespace) as scheduler:
        console.print(scheduler.add_schedule(**fields))


@app.command()
def update(
    schedule_id: str = typer.Argument(..., metavar="ID", help="Schedule id."),
    cron: str | None = typer.Option(None, "--cron", metavar="EXPR", help="New cron expression."),
    interval: float | None = typer.Option(
        None, "--interval", metavar="SECONDS", help="New interval."
    ),
    tz: str | None = typer.Option(None, "--timezone", metavar="ZONE", help="New time zone."),
    task: str | None = typer.Option(None, "--task", metavar="NAME", help="New task function."),
    user: str | None = typer.Option(None, *TENANT_NAMES, metavar="TENANT", help="New tenant."),
    priority: int | None = typer.Option(
        None, "--priority", "-p", metavar="P", help="New priority."
    ),
    args: str | None = typer.Option(
        None, "--args", metavar="JSON", help="New JSON list of positional arguments."
    ),
    kwargs: str | None = typer.Option(
        None, "--kwargs", metavar="JSON", help="New JSON object of keyword arguments."
    ),
    missed: str | None = typer.Option(None, "--missed", metavar="POLICY", help="run_once or skip."),
    url: str | None = URL,
    namespace: str = NAMESPACE,
) -> None:
    """Change a schedule; instances use the change from their next cycle."""
    changes: dict[str, Any] = {"cron": cron, "interval": interval, "timezone": tz, "missed": missed}
    changes = {key: value for key, value in changes.items() if value is not None}
    with _scheduler(url, namespace) as scheduler:
        template = _template(task, user, priority, args, kwargs)
        if template:
            current = scheduler.get_schedule(schedule_id).schedule.task.model_dump()
            changes["task"] = {**current, **template}
        _listing([scheduler.update_schedule(schedule_id, **changes)]).print()


@app.command()
def remove(
    schedule_id: str = typer.Argument(..., metavar="ID", help="Schedule id."),
    url: str | None = URL,
    namespace: str = NAMESPACE,
) -> None:
    """Delete a schedule."""
    with _scheduler(url, namespace) as scheduler:
        scheduler.remove_schedule(schedule_id)
        console.print(f"removed {schedule_id}")


@app.command()
def pause(
    schedule_id: str = typer.Argument(..., metavar="ID", help="Schedule id."),
    url: str | None = URL,
    namespace: str = NAMESPACE,
) -> None:
    """Pause a schedule (no runs until resumed)."""
    with _scheduler(url, namespace) as scheduler:
        console.print(scheduler.pause_schedule(schedule_id).value)


@app.command()
def resume(
    schedule_id: str = typer.Argument(..., metavar="ID", help="Schedule id."),
    url: str | None = URL,
    namespace: str = NAMESPACE,
) -> None:
    """Resume a paused or failed schedule from its next run after now."""
    with _scheduler(url, namespace) as scheduler:
        console.print(scheduler.resume_schedule(schedule_id).value)


@app.command("list")
def list_(url: str | None = URL, namespace: str = NAMESPACE, as_json: bool = JSON_OPTION) -> None:
    """Every schedule with its state and next run."""
    require_data(url, namespace)
    with _scheduler(url, namespace) as scheduler:
        schedules = scheduler.list_schedules()
    if as_json:
        print_json({"schedules": [_schedule_json(info) for info in schedules]})
        return
    _listing(schedules).print(empty="no schedule")


@app.command()
def show(
    schedule_id: str = typer.Argument(..., metavar="ID", help="Schedule id."),
    url: str | None = URL,
    namespace: str = NAMESPACE,
) -> None:
    """One schedule in full, as JSON (times as epoch seconds, as in every --json)."""
    require_data(url, namespace, looked_up=f"schedule {schedule_id!r}")
    with _scheduler(url, namespace) as scheduler:
        info = scheduler.get_schedule(schedule_id)
    print_json(_schedule_json(info))


def _schedule_json(info: ScheduleInfo) -> dict[str, Any]:
    schedule = info.schedule.model_dump(mode="json")
    if info.schedule.start_at is not None:
        schedule["start_at"] = info.schedule.start_at.timestamp()
    return {**dataclasses.asdict(info), "state": info.state.value, "schedule": schedule}


@app.command()
def health(url: str | None = URL, namespace: str = NAMESPACE) -> None:
    """The schedules' health from the server's records: exit 0 OK, 1 warning, 2 error
    (active schedules with no live instance, or no server)."""
    require_data(url, namespace)
    with _scheduler(url, namespace) as scheduler:
        report = scheduler.health_check()
    console.print(f"{report.status.value}")
    for problem in report.problems:
        console.print(f"- {problem}")
    details = report.details
    if details["server_reachable"]:
        states = [shown["state"] for shown in details["instances"].values()]
        console.print(f"instances: {len(details['live_instances'])} live, "
                      f"{states.count('stale')} stale, {states.count('stopped')} stopped; "
                      f"schedules: {details['active_schedules']} active of "
                      f"{details['schedules']}")  # fmt: skip
    raise typer.Exit(HEALTH_EXIT[report.status])


@app.command()
def run(
    url: str | None = URL,
    namespace: str = NAMESPACE,
    poll_interval: float = typer.Option(
        1.0, "--poll-interval", metavar="SECONDS", help="Longest wait between cycles."
    ),
    lock_timeout: float = typer.Option(
        30.0, "--lock-timeout", metavar="SECONDS", help="Lifetime of a schedule lock."
    ),
    instance_id: str | None = typer.Option(
        None, "--instance-id", metavar="ID", help="Instance id (default host:pid:random)."
    ),
    metrics_port: int | None = METRICS_PORT_OPTION,
    health_port: int | None = HEALTH_PORT_OPTION,
    monitoring_host: str = MONITORING_HOST_OPTION,
    _log_format: str = LOG_FORMAT_OPTION,
) -> None:
    """Run a scheduler instance until SIGTERM / SIGINT (any number may run at once)."""
    config = {"poll_interval": poll_interval, "lock_timeout": lock_timeout,
              "instance_id": instance_id}  # fmt: skip
    setup_logging()
    with _scheduler(url, namespace, **config) as scheduler:
        probe = server_probe(url)
        if metrics_port is not None:
            metrics = Metrics()
            metrics.watch_scheduler(scheduler.metrics)
            serve_metrics(metrics, metrics_port, probe, monitoring_host)
        serve_probes(probe, health_port, host=monitoring_host)
        announce(
            "scheduler",
            f"server {server_name(url)}",
            f"namespace {namespace}",
            "submitting the due runs of every schedule",
            f"instance {instance_id}" if instance_id else "",
        )
        scheduler.run()
        figures = scheduler.metrics
        say(
            f"fairque scheduler: stopped after the current cycle: {figures.submitted} run(s) "
            f"submitted, {figures.failed} failed submission(s), {figures.skipped} skipped"
        )
