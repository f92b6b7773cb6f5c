"""The ``fairque`` command."""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from fairque import demo as demo_module
from fairque import embedded
from fairque.client.sharded import open_queue
from fairque.config import URL_ENV
from fairque.errors import FairQueueError
from fairque.models import QueueStats, Task
from fairque.worker import Worker, load_config
from fairque.worker.processes import run_processes

app = typer.Typer(
    help="fairque: a task queue that is fair between tenants, on Redis or Valkey.",
    no_args_is_help=True,
)
server_app = typer.Typer(help="The embedded Valkey server used when no URL is given.")
app.add_typer(server_app, name="server")
console = Console()
errors = Console(stderr=True)

URL_OPTION = typer.Option(None, envvar=URL_ENV, help="Server URL (default: embedded Valkey).")
NAMESPACE_OPTION = typer.Option("default", envvar="FAIRQUE_NAMESPACE", help="Queue namespace.")
SHARDS_OPTION = typer.Option(
    1, min=1, max=1024, envvar="FAIRQUE_SHARDS", help="Shards of a sharded queue (1: not sharded)."
)


def _fail(message: str) -> typer.Exit:
    errors.print(f"[red]error:[/red] {message}")
    return typer.Exit(2)


def _json(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(f"{option}: not valid JSON ({exc})") from None


@app.command()
def worker(
    config: Path | None = typer.Option(None, "--config", "-c", help="Worker YAML file."),
    tasks: list[str] = typer.Option([], "--tasks", "-t", help="Module defining @task functions."),
    url: str | None = URL_OPTION,
    namespace: str | None = typer.Option(None, help="Queue namespace (overrides the file)."),
    concurrency: int | None = typer.Option(None, help="Tasks run at once."),
    shards: int | None = typer.Option(None, help="Serve every shard of a sharded queue."),
    processes: int = typer.Option(1, min=1, max=256, help="Worker processes (CPU-bound work)."),
) -> None:
    """Run a worker until SIGTERM / SIGINT (then running tasks get the grace period)."""
    given = {"redis_url": url, "namespace": namespace, "concurrency": concurrency,
             "shards": shards}  # fmt: skip
    try:
        settings = load_config(config, overrides={k: v for k, v in given.items() if v is not None})
    except FairQueueError as exc:
        raise _fail(str(exc)) from None
    for module in tasks:
        _import_tasks(module)
    if processes > 1:
        raise typer.Exit(run_processes(settings, processes, tasks))
    Worker(settings).run()


def _import_tasks(module: str) -> None:
    """Imports a module so that its @task functions register themselves."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise _fail(f"--tasks {module}: {exc}") from None


@app.command()
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
    payload = {"args": _json(args, "--args"), "kwargs": _json(kwargs, "--kwargs")}
    try:
        task = Task(user_id=user, name=name, priority=priority, payload=payload, delay=delay)
        with open_queue(url, namespace, shards) as queue:
            console.print(queue.push(task))
    except FairQueueError as exc:
        raise _fail(str(exc)) from None


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


@app.command()
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


@app.command()
def demo(
    url: str | None = typer.Option(None, help="Server URL (default: a throwaway Valkey)."),
    tenants: int = typer.Option(8, min=2, max=100, help="Tenants, one of them heavy."),
    tasks: int = typer.Option(2000, min=10, max=1_000_000, help="Tasks in all."),
) -> None:
    """Show fairness: small tenants finish early although a heavy one pushed first."""
    demo_module.run(url, tenants, tasks, console)


@server_app.command("status")
def server_status() -> None:
    """Is the embedded server of $FAIRQUE_HOME running?"""
    folder = embedded.home()
    pid = embedded.server_pid(folder)
    if pid is None:
        console.print(f"not running (data folder {folder})")
    else:
        console.print(f"running, pid {pid}, socket {folder / embedded.SOCKET_NAME}")


@server_app.command("stop")
def server_stop() -> None:
    """Stop the embedded server (its data stays on disk)."""
    stopped = embedded.stop_server()
    console.print("stopped" if stopped else "was not running")


def main() -> None:
    """Entry point of the ``fairque`` script."""
    app()
