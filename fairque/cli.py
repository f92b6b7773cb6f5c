"""The ``fairque`` command."""

from __future__ import annotations

import asyncio
import importlib
import ipaddress
import json
import socket
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from fairque import demo as demo_module
from fairque import embedded
from fairque.cli_scheduler import app as scheduler_app
from fairque.client import FairQueue
from fairque.client.sharded import open_queue
from fairque.config import URL_ENV
from fairque.errors import FairQueueError
from fairque.metrics import Metrics
from fairque.models import QueueStats, Task
from fairque.outage import OUTAGE
from fairque.storage.connect import open_async_storage, open_storage
from fairque.storage.contract import Contract
from fairque.storage.worker import (
    Manager,
    StorageWorker,
    StorageWorkerConfig,
    serve,
    serve_manager,
)
from fairque.worker import Worker, load_config
from fairque.worker.processes import run_processes

app = typer.Typer(
    help="fairque: a task queue that is fair between tenants, on Redis or Valkey.",
    no_args_is_help=True,
)
server_app = typer.Typer(help="The embedded Valkey server used when no URL is given.")
app.add_typer(server_app, name="server")
app.add_typer(scheduler_app, name="scheduler")
console = Console()
errors = Console(stderr=True)

URL_OPTION = typer.Option(None, envvar=URL_ENV, help="Server URL (default: embedded Valkey).")
NAMESPACE_OPTION = typer.Option("default", envvar="FAIRQUE_NAMESPACE", help="Queue namespace.")
STORAGE_OPTION = typer.Option(
    None,
    "--storage",
    envvar="FAIRQUE_STORAGE",
    help="Storage URL: tarantool://host:port, or a Redis URL (default: --url).",
)
SHARDS_OPTION = typer.Option(
    1, min=1, max=1024, envvar="FAIRQUE_SHARDS", help="Shards of a sharded queue (1: not sharded)."
)


def _fail(message: str) -> typer.Exit:
    errors.print(f"[red]error:[/red] {message}", soft_wrap=True)  # one line, however long
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
    metrics_port: int | None = typer.Option(
        None, min=0, max=65535, help="Serve Prometheus metrics on 127.0.0.1:PORT (0: any)."
    ),
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
        if metrics_port is not None:
            raise _fail("--metrics-port serves one process: use it with --processes 1")
        raise typer.Exit(run_processes(settings, processes, tasks))
    metrics = None
    if metrics_port is not None:
        metrics = Metrics()
        metrics.watch_queue(FairQueue(settings.redis_url, settings.namespace))
        server = metrics.serve(metrics_port)
        console.print(f"metrics on http://127.0.0.1:{server.port}/metrics")
    Worker(settings, metrics=metrics).run()


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


@app.command("storage-worker")
def storage_worker(
    contract: Path = typer.Option(..., "--contract", help="Queue-contract YAML (seed 004)."),
    handlers: str = typer.Option(
        ..., help="module:attribute, a mapping of queue name (or number) to handler."
    ),
    config: Path | None = typer.Option(None, "--config", "-c", help="Storage worker YAML."),
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    metrics_port: int | None = typer.Option(
        None, min=0, max=65535, help="Serve Prometheus metrics on 127.0.0.1:PORT (0: any)."
    ),
    manager: float = typer.Option(
        0.0, min=0, help="Also run a Manager here, every N s (0: none; see storage-manager)."
    ),
    storage: str | None = STORAGE_OPTION,
    worker_id: str | None = typer.Option(
        None, "--worker-id", help="Name on the Manager's board (default: host-pid-random)."
    ),
) -> None:
    """Run contract handlers over numbered queues until SIGTERM / SIGINT."""
    target = storage or url
    try:
        queues = Contract.load(contract)
        settings = StorageWorkerConfig.load(config) if config else StorageWorkerConfig()
        watched = open_storage(target, namespace) if metrics_port is not None else None
    except FairQueueError as exc:
        raise _fail(str(exc)) from None
    table = _import_handlers(handlers)
    metrics = Metrics()
    if watched is not None:
        metrics.watch_storage(watched)
        server = metrics.serve(metrics_port or 0)
        console.print(f"metrics on http://127.0.0.1:{server.port}/metrics")

    async def run() -> StorageWorker:
        async with open_async_storage(target, namespace) as opened:
            return await serve(
                opened,
                queues,
                table,
                settings,
                metrics=metrics,
                manager_interval=manager,
                worker_id=worker_id,
            )

    try:
        worker = asyncio.run(run())
    except FairQueueError as exc:
        raise _fail(str(exc)) from None
    done = sum(stats.processed for stats in worker.stats.values())
    console.print(f"stopped after {done} processed task(s)")


@app.command("storage-manager")
def storage_manager(
    storage: str | None = STORAGE_OPTION,
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    interval: float = typer.Option(5.0, min=0.01, max=3600, help="Seconds between rounds."),
    once: bool = typer.Option(False, "--once", help="One round: print the plan and exit."),
) -> None:
    """Steer storage workers in every process: publish processors per queue per worker.

    Prints each new plan as one JSON line ({worker id: [queue of each processor]}) and
    runs until SIGTERM / SIGINT.
    """

    def show(plan: dict[str, list[int]]) -> None:
        typer.echo(json.dumps(plan, sort_keys=True))

    async def run() -> None:
        async with open_async_storage(storage or url, namespace) as opened:
            if once:
                show(await Manager(opened).rebalance())
            else:
                await serve_manager(opened, interval, show)

    try:
        asyncio.run(run())
    except FairQueueError as exc:
        raise _fail(str(exc)) from None
    except OUTAGE as exc:  # --once on an unreachable Redis (a Manager that runs retries)
        raise _fail(f"storage unreachable: {' '.join(str(exc).split())}") from None


def _import_handlers(spec: str) -> Any:
    """The mapping ``module:attribute`` names."""
    module_name, _, attribute = spec.partition(":")
    try:
        table = getattr(importlib.import_module(module_name), attribute or "HANDLERS")
    except (ImportError, AttributeError) as exc:
        raise _fail(f"--handlers {spec}: {exc}") from None
    if not isinstance(table, Mapping):
        raise _fail(f"--handlers {spec}: expected a mapping of queue to handler")
    return table


@app.command()
def demo(
    url: str | None = typer.Option(None, help="Server URL (default: a throwaway Valkey)."),
    tenants: int = typer.Option(8, min=2, max=100, help="Tenants, one of them heavy."),
    tasks: int = typer.Option(2000, min=10, max=1_000_000, help="Tasks in all."),
) -> None:
    """Show fairness: small tenants finish early although a heavy one pushed first."""
    demo_module.run(url, tenants, tasks, console)


TOKEN_OPTION = typer.Option(
    None, envvar="FAIRQUE_MASTER_TOKEN", help="Bearer token (required off loopback)."
)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command()
def master(
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8080, min=0, max=65535, help="Port to bind."),
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    token: str | None = TOKEN_OPTION,
    result_ttl: float = typer.Option(3600.0, min=1, help="Seconds a kept result waits."),
    openapi: Path | None = typer.Option(None, help="Write the OpenAPI document here and exit."),
) -> None:
    """Run the JQ master: HTTP + MessagePack API for pushers, workers and a Web UI."""
    from fairque.http.master import MasterConfig, create_master

    config = MasterConfig(url=url, namespace=namespace, token=token, result_ttl=result_ttl)
    app_ = create_master(config)
    if openapi is not None:
        openapi.write_text(json.dumps(app_.openapi_schema.to_schema(), indent=2) + "\n")
        return
    if not token and not _is_loopback(host):
        raise _fail(f"--host {host}: set a token (--token or $FAIRQUE_MASTER_TOKEN) off loopback")
    import uvicorn

    uvicorn.run(app_, host=host, port=port, log_level="warning")


@app.command()
def dashboard(
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8081, min=0, max=65535, help="Port to bind."),
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    token: str | None = TOKEN_OPTION,
) -> None:
    """Serve the Web UI alone (at /ui), reading the queue at URL."""
    from fairque.http.ui import DashboardConfig, UiConfig, create_dashboard

    if not token and not _is_loopback(host):
        raise _fail(f"--host {host}: set a token (--token or $FAIRQUE_MASTER_TOKEN) off loopback")
    import uvicorn

    config = DashboardConfig(UiConfig(url=url, namespace=namespace), token=token)
    uvicorn.run(create_dashboard(config), host=host, port=port, log_level="warning")


@app.command("http-worker")
def http_worker(
    master_url: str = typer.Option(..., "--master", help="The master's URL."),
    tasks: list[str] = typer.Option([], "--tasks", "-t", help="Module defining @task functions."),
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8081, min=1, max=65535, help="Port to bind."),
    public_url: str | None = typer.Option(None, "--url", help="URL the master reaches us at."),
    capacity: int = typer.Option(4, min=1, max=1000, help="Jobs run at once."),
    worker_id: str | None = typer.Option(None, help="Worker id (default: host-port)."),
    token: str | None = TOKEN_OPTION,
) -> None:
    """Run @task functions for a JQ master, behind the seed 003 worker API."""
    from fairque.http.worker import HttpWorkerConfig, create_http_worker
    from fairque.tasks import registry

    for module in tasks:
        _import_tasks(module)
    config = HttpWorkerConfig(
        master=master_url,
        url=public_url or f"http://{host}:{port}",
        worker_id=worker_id or f"{socket.gethostname()}-{port}",
        capacity=capacity,
        token=token,
    )
    if not token and not _is_loopback(host):
        raise _fail(f"--host {host}: set a token (--token or $FAIRQUE_MASTER_TOKEN) off loopback")
    try:
        app_ = create_http_worker(config, registry)
    except FairQueueError as exc:
        raise _fail(str(exc)) from None
    import uvicorn

    uvicorn.run(app_, host=host, port=port, log_level="warning")


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
