"""``fairque worker``, ``push``, ``stats`` and ``demo``: the fair queue's commands."""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import time
from pathlib import Path
from typing import Any

import typer
from rich.live import Live

from fairque import demo as demo_module
from fairque.cli.common import (
    HEALTH_PORT_OPTION,
    JSON_OPTION,
    LOG_FORMAT_OPTION,
    METRICS_PORT_OPTION,
    MONITORING_HOST_OPTION,
    NAMESPACE_ENV,
    SHARDS_ENV,
    TENANT_NAMES,
    QueueTarget,
    State,
    Typer,
    announce,
    console,
    errors,
    fail,
    import_module,
    on_queue,
    parse_json_list,
    parse_json_object,
    refuse_newer_format,
    say,
    server_name,
    setup_logging,
    warn,
)
from fairque.cli.listing import Listing, print_json, when
from fairque.cli.serving import serve_metrics, serve_probes, server_probe
from fairque.config import URL_ENV
from fairque.engine.eviction import eviction_warning
from fairque.engine.records import TaskState
from fairque.errors import FairQueueError, InvalidInput, ServerUnavailable
from fairque.metrics import Metrics
from fairque.queue.client import Queue, open_queue
from fairque.queue.models import QueueStats, Task, TenantStats
from fairque.runners.fair_worker.config import WorkerConfig, load_config
from fairque.runners.fair_worker.functions import registry
from fairque.runners.fair_worker.hooks import load_hooks
from fairque.runners.fair_worker.processes import run_processes
from fairque.runners.fair_worker.runner import Worker

TASKS_OPTION = typer.Option(
    [],
    "--tasks",
    "-t",
    envvar="FAIRQUE_TASKS",
    metavar="MODULE",
    help="Module defining @task functions, imported from the current directory too "
    "(repeat it for more).",
)


def worker(
    config: Path | None = typer.Option(
        None, "--config", "-c", metavar="FILE", help="Worker YAML file."
    ),
    tasks: list[str] = TASKS_OPTION,
    url: str | None = typer.Option(
        None, "--url", envvar=URL_ENV, metavar="URL", help="Server URL (overrides the file)."
    ),
    namespace: str | None = typer.Option(
        None,
        "--namespace",
        envvar=NAMESPACE_ENV,
        metavar="NAME",
        help="Queue namespace (overrides the file).",
    ),
    concurrency: int | None = typer.Option(
        None, "--concurrency", min=1, metavar="N", help="Tasks run at once."
    ),
    shards: int | None = typer.Option(
        None,
        "--shards",
        min=1,
        max=1024,
        envvar=SHARDS_ENV,
        metavar="N",
        help="Serve every shard of a sharded queue of N shards.",
    ),
    processes: int = typer.Option(
        1, "--processes", min=1, max=256, metavar="N", help="Worker processes (CPU-bound work)."
    ),
    sync_runner: str | None = typer.Option(
        None,
        "--sync-runner",
        metavar="thread|process",
        help="Sync functions on threads, or in task processes (killed at the timeout).",
    ),
    hooks: str | None = typer.Option(
        None,
        "--hooks",
        envvar="FAIRQUE_WORKER_HOOKS",
        metavar="MODULE:NAME",
        help="WorkerHooks around each task (a subclass or an instance), for Sentry, "
        "tracing or your own metrics.",
    ),
    metrics_port: int | None = METRICS_PORT_OPTION,
    health_port: int | None = HEALTH_PORT_OPTION,
    monitoring_host: str = MONITORING_HOST_OPTION,
    _log_format: str = LOG_FORMAT_OPTION,
) -> None:
    """Run a worker until SIGTERM / SIGINT (then running tasks get the grace period; a
    second signal stops at once)."""
    given = {"redis_url": url, "namespace": namespace, "concurrency": concurrency,
             "shards": shards, "sync_runner": sync_runner}  # fmt: skip
    try:
        settings = load_config(config, overrides={k: v for k, v in given.items() if v is not None})
    except FairQueueError as exc:
        raise fail(str(exc)) from None
    if processes > 1 and metrics_port is not None:
        raise fail("--metrics-port serves one process: use it with --processes 1")
    for module in tasks:
        import_module(module, "--tasks")
    if not registry.functions:
        raise fail("no task functions: give --tasks MODULE, a module of @task functions")
    around = None
    if hooks is not None:
        if module_name := hooks.partition(":")[0]:
            import_module(module_name, "--hooks")  # found where --tasks are
        try:
            around = load_hooks(hooks)
        except InvalidInput as exc:
            raise fail(f"--hooks {exc.message}") from None
    setup_logging()
    metrics = None
    probe = server_probe(settings.redis_url)
    if metrics_port is not None:  # first: a taken port ends the command before it starts
        metrics = Metrics()
        queue = open_queue(settings.redis_url, settings.namespace, settings.shards)
        metrics.watch_queue(queue, settings.namespace)
        serve_metrics(metrics, metrics_port, probe, monitoring_host)
    serve_probes(probe, health_port, host=monitoring_host)
    if processes > 1:  # refused here in one line, not by each child
        with contextlib.suppress(ServerUnavailable):  # the children wait for it, and say so
            refuse_newer_format(settings.redis_url, settings.namespace, settings.shards)
    announce("worker", *_worker_facts(settings, processes))
    if processes > 1:
        code = run_processes(settings, processes, tasks, State.log_format, hooks)
        say(f"fairque worker: stopped ({processes} processes)")
        raise typer.Exit(code)
    running = Worker(settings, metrics=metrics, hooks=around)
    try:
        running.run()
    except FairQueueError as exc:  # refused at start (a function a task process cannot load)
        raise fail(str(exc)) from None
    say(
        f"fairque worker: stopped: {running.finished} finished, {running.failed} failed, "
        f"{running.handed_back} handed back"
    )


def _worker_facts(settings: WorkerConfig, processes: int) -> list[str]:
    shards = f" ({settings.shards} shards)" if settings.shards > 1 else ""
    names = sorted(registry.functions)
    if settings.assigned_users or settings.steal_targets:
        tenants = f"tenants {', '.join(settings.assigned_users or [])} first"
        if settings.steal_targets:
            tenants += f", then {', '.join(settings.steal_targets)}"
    else:
        tenants = "every tenant"
    return [
        f"server {server_name(settings.redis_url)}",
        f"namespace {settings.namespace}{shards}",
        f"serving {tenants}",
        f"functions {', '.join(names)}" if names else "no functions registered (give --tasks)",
        f"id {settings.id}, concurrency {settings.concurrency}"
        + (f" x {processes} processes" if processes > 1 else ""),
    ]


@on_queue
def push(
    target: QueueTarget,
    name: str = typer.Argument(..., metavar="NAME", help="Registered task function name."),
    user: str = typer.Option(..., *TENANT_NAMES, metavar="TENANT", help="Tenant (user id)."),
    priority: int | None = typer.Option(
        None,
        "--priority",
        "-p",
        min=1,
        max=6,
        metavar="P",
        help="1 (low) .. 5 (high), 6 critical (default: the name's, else 3).",
    ),
    args: str = typer.Option(
        "[]", "--args", metavar="JSON", help="JSON list of positional arguments."
    ),
    kwargs: str = typer.Option(
        "{}", "--kwargs", metavar="JSON", help="JSON object of keyword arguments."
    ),
    delay: float = typer.Option(
        0.0, "--delay", min=0, metavar="SECONDS", help="Seconds before it may run."
    ),
    keep_result: bool = typer.Option(
        False, "--keep-result", help="Keep its result (for fairque task result ID)."
    ),
) -> None:
    """Push one task and print its id."""
    payload = {
        "args": parse_json_list(args, "--args"),
        "kwargs": parse_json_object(kwargs, "--kwargs"),
    }
    fields: dict[str, Any] = {"user_id": user, "name": name, "payload": payload, "delay": delay}
    if priority is not None:  # else the name's default
        fields["priority"] = priority
    task = Task(keep_result=keep_result, **fields)
    with target.open() as queue:
        typer.echo(queue.push(task))
        serving = [worker for worker in queue.workers() if name in worker.functions]
    if not serving:
        errors.print(
            f"[yellow]warning:[/yellow] no live worker serves {name}: the task waits for one",
            soft_wrap=True,
        )


@on_queue
def workers(
    target: QueueTarget,
    as_json: bool = JSON_OPTION,
) -> None:
    """Live workers: what they serve, concurrency, tasks in flight, last beat."""
    with target.open_to_read() as queue:
        live = queue.workers()
    if as_json:
        print_json({"workers": [dataclasses.asdict(worker) for worker in live]})
        return
    listing = Listing(
        f"live workers of {target.namespace}",
        ("worker", "host", "pid", "functions", "concurrency", "in flight", "last beat (UTC)"),
        right=("pid", "concurrency", "in flight"),
    )
    for worker in live:
        listing.add(worker.worker_id, worker.host, worker.pid, ", ".join(worker.functions),
                    worker.concurrency, worker.in_flight, when(worker.seen_at))  # fmt: skip
    listing.print(empty="no live worker")


STAT_COLUMNS = ("queued", "pushed", "finished", "failed", "retried", "canceled")


OTHER_TENANTS = "other tenants"  # those beyond the busiest, summed


def stat_rows(stats: QueueStats) -> dict[str, dict[str, int]]:
    """The rows ``fairque stats`` shows, which add up: the busiest tenants' fair tasks,
    the other tenants', the sum over tenants, the rest (strict jobs and storage tasks,
    which have no tenant), and all.

    ``queued`` is ready now; the others are lifetime counters.
    """
    rows = {tenant: _columns(figures) for tenant, figures in stats.tenants.items()}
    tenants = _columns(stats.all_tenants)
    shown = {column: sum(row[column] for row in rows.values()) for column in STAT_COLUMNS}
    rest = {column: tenants[column] - shown[column] for column in STAT_COLUMNS}
    if any(rest.values()):
        rows[OTHER_TENANTS] = rest
    everything = {column: stats.counters.get(column, 0) for column in STAT_COLUMNS}
    everything["queued"] = stats.states.get(TaskState.QUEUED, 0)
    others = {column: everything[column] - tenants[column] for column in STAT_COLUMNS}
    return {**rows, "all tenants": tenants, "jobs + storage": others, "all kinds": everything}


def _columns(figures: TenantStats) -> dict[str, int]:
    values = dataclasses.asdict(figures)
    return {column: values[column] for column in STAT_COLUMNS}


def _stats_listing(stats: QueueStats, namespace: str) -> Listing:
    states = ", ".join(f"{state.value} {count}" for state, count in stats.states.items())
    listing = Listing(
        f"fairque {namespace}",
        ("tenant", *STAT_COLUMNS),
        right=STAT_COLUMNS,
        caption=f"now, every kind: {states}\n"
        "queued: ready now; the other columns count since the namespace began",
    )
    for label, row in stat_rows(stats).items():
        listing.add(label, *(row[column] for column in STAT_COLUMNS),
                    section=label == "all tenants")  # fmt: skip
    return listing


def _stats_json(stats: QueueStats) -> dict[str, Any]:
    return {
        "states": {state.value: count for state, count in stats.states.items()},
        "counters": stats.counters,
        "rows": stat_rows(stats),
    }


@on_queue
def stats(
    target: QueueTarget,
    watch: float = typer.Option(
        0.0, "--watch", min=0, metavar="SECONDS", help="Refresh every SECONDS (0: once)."
    ),
    count: int = typer.Option(
        0, "--count", min=0, metavar="N", help="With --watch: stop after N refreshes (0: never)."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Tasks per state and per tenant (all shards summed); the rows add up.

    The tenant rows are the 20 busiest (most ready tasks), then the other tenants summed;
    `fairque tenants --busiest` pages through them all.

    The tenant rows count fair-queue tasks; strict jobs (the JQ master) and storage
    tasks have no tenant and are counted in their own row; "all kinds" counts every kind.

    With --watch on a terminal the table refreshes in place; piped, each refresh is
    printed as it comes (tab-separated, a blank line between), and SIGTERM ends it.
    """
    with target.open_to_read() as queue:
        if warning := eviction_warning(queue.redis):
            warn(warning)
        if as_json:
            print_json(_stats_json(queue.stats()))
            return
        if watch <= 0:
            _stats_listing(queue.stats(), target.namespace).print()
            return
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            _watch(queue, target.namespace, watch, count)
        except KeyboardInterrupt:
            pass  # Ctrl-C or SIGTERM: the refreshes so far stay printed
        finally:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def _watch(queue: Queue, namespace: str, every: float, count: int) -> None:
    shown = 1
    if not console.is_terminal:
        _stats_listing(queue.stats(), namespace).print()
        while not count or shown < count:
            time.sleep(every)  # a refresh period, not a wait for state
            typer.echo("")
            _stats_listing(queue.stats(), namespace).print()
            shown += 1
        return
    with Live(_stats_listing(queue.stats(), namespace).table(), console=console) as live:
        while not count or shown < count:
            time.sleep(every)  # a refresh period, not a wait for state
            live.update(_stats_listing(queue.stats(), namespace).table())
            shown += 1


def demo(
    url: str | None = typer.Option(
        None, "--url", metavar="URL", help="Server URL (default: a throwaway Valkey)."
    ),
    tenants: int = typer.Option(
        8, "--tenants", min=2, max=100, metavar="N", help="Tenants, one of them heavy."
    ),
    count: int = typer.Option(
        2000, "--count", min=10, max=1_000_000, metavar="N", help="Tasks in all."
    ),
) -> None:
    """Show fairness: small tenants finish early although a heavy one pushed first.

    Runs on a throwaway Valkey unless --url is given ($FAIRQUE_REDIS_URL is not read:
    the demo never fills a queue you use).
    """
    demo_module.run(url, tenants, count, console)


def register(app: Typer) -> None:
    """Adds this module's commands to ``app``."""
    for command in (worker, push, stats, workers, demo):
        app.command()(command)
