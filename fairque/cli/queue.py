"""``fairque worker``, ``push``, ``stats`` and ``demo``: the fair queue's commands."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.live import Live
from rich.table import Table

from fairque import demo as demo_module
from fairque.cli.common import (
    METRICS_PORT_OPTION,
    NAMESPACE_OPTION,
    SHARDS_OPTION,
    URL_OPTION,
    console,
    fail,
    import_module,
    parse_json,
    serve_metrics,
)
from fairque.errors import FairQueueError
from fairque.metrics import Metrics
from fairque.queue.models import QueueStats, Task
from fairque.queue.sharded import open_queue
from fairque.worker import Worker, load_config
from fairque.worker.processes import run_processes


def worker(
    config: Path | None = typer.Option(None, "--config", "-c", help="Worker YAML file."),
    tasks: list[str] = typer.Option([], "--tasks", "-t", help="Module defining @task functions."),
    url: str | None = URL_OPTION,
    namespace: str | None = typer.Option(None, help="Queue namespace (overrides the file)."),
    concurrency: int | None = typer.Option(None, help="Tasks run at once."),
    shards: int | None = typer.Option(None, help="Serve every shard of a sharded queue."),
    processes: int = typer.Option(1, min=1, max=256, help="Worker processes (CPU-bound work)."),
    sync_runner: str | None = typer.Option(
        None, help="Sync functions on 'thread's or in 'process'es (killed at the timeout)."
    ),
    metrics_port: int | None = METRICS_PORT_OPTION,
) -> None:
    """Run a worker until SIGTERM / SIGINT (then running tasks get the grace period; a
    second signal stops at once)."""
    given = {"redis_url": url, "namespace": namespace, "concurrency": concurrency,
             "shards": shards, "sync_runner": sync_runner}  # fmt: skip
    try:
        settings = load_config(config, overrides={k: v for k, v in given.items() if v is not None})
    except FairQueueError as exc:
        raise fail(str(exc)) from None
    for module in tasks:
        import_module(module, "--tasks")
    if processes > 1:
        if metrics_port is not None:
            raise fail("--metrics-port serves one process: use it with --processes 1")
        raise typer.Exit(run_processes(settings, processes, tasks))
    metrics = None
    if metrics_port is not None:
        metrics = Metrics()
        queue = open_queue(settings.redis_url, settings.namespace, settings.shards)
        metrics.watch_queue(queue, settings.namespace)
        serve_metrics(metrics, metrics_port)
    try:
        Worker(settings, metrics=metrics).run()
    except FairQueueError as exc:  # refused at start (a function a task process cannot load)
        raise fail(str(exc)) from None


def push(
    name: str = typer.Argument(..., help="Registered task function name."),
    user: str = typer.Option(..., "--user", "-u", help="Tenant (user id)."),
    priority: int = typer.Option(3, "--priority", "-p", help="1 (low) .. 5 (high), 6 critical."),
    args: str = typer.Option("[]", help="JSON list of positional arguments."),
    kwargs: str = typer.Option("{}", help="JSON object of keyword arguments."),
    delay: float = typer.Option(0.0, help="Seconds before it may run."),
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    shards: int = SHARDS_OPTION,
) -> None:
    """Push one task and print its id."""
    payload = {"args": parse_json(args, "--args"), "kwargs": parse_json(kwargs, "--kwargs")}
    try:
        task = Task(user_id=user, name=name, priority=priority, payload=payload, delay=delay)
        with open_queue(url, namespace, shards) as queue:
            console.print(queue.push(task))
    except FairQueueError as exc:
        raise fail(str(exc)) from None


def _stats_table(stats: QueueStats, namespace: str) -> Table:
    table = Table(title=f"fairque {namespace}")
    table.add_column("tenant")
    for column in ("queued", "pushed", "finished", "failed", "retried", "canceled"):
        table.add_column(column, justify="right")
    for tenant, figures in stats.tenants.items():
        row = (figures.queued, figures.pushed, figures.finished, figures.failed, figures.retried,
               figures.canceled)  # fmt: skip
        table.add_row(tenant, *map(str, row))
    states = ", ".join(f"{state.value} {count}" for state, count in stats.states.items())
    table.caption = states
    return table


def stats(
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    shards: int = SHARDS_OPTION,
    watch: float = typer.Option(0.0, help="Refresh every this many seconds (0: once)."),
    rounds: int = typer.Option(0, hidden=True, help="Stop watching after this many refreshes."),
) -> None:
    """Tasks per state and per tenant (all shards summed)."""
    with open_queue(url, namespace, shards) as queue:
        if watch <= 0:
            console.print(_stats_table(queue.stats(), namespace))
            return
        with Live(_stats_table(queue.stats(), namespace), console=console) as live:
            shown = 1
            while not rounds or shown < rounds:
                time.sleep(watch)  # a refresh period, not a wait for state
                live.update(_stats_table(queue.stats(), namespace))
                shown += 1


def demo(
    url: str | None = typer.Option(None, help="Server URL (default: a throwaway Valkey)."),
    tenants: int = typer.Option(8, min=2, max=100, help="Tenants, one of them heavy."),
    tasks: int = typer.Option(2000, min=10, max=1_000_000, help="Tasks in all."),
) -> None:
    """Show fairness: small tenants finish early although a heavy one pushed first."""
    demo_module.run(url, tenants, tasks, console)


def register(app: typer.Typer) -> None:
    """Adds this module's commands to ``app``."""
    for command in (worker, push, stats, demo):
        app.command()(command)
