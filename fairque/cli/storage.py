"""``fairque storage-worker`` and ``storage-manager``: contract handlers over numbered
queues, and the Manager that steers them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer

from fairque.cli.common import (
    HEALTH_PORT_OPTION,
    LOG_FORMAT_OPTION,
    METRICS_PORT_OPTION,
    MONITORING_HOST_OPTION,
    NAMESPACE_OPTION,
    URL_OPTION,
    Typer,
    announce,
    fail,
    import_module,
    say,
    server_name,
    setup_logging,
)
from fairque.cli.serving import serve_metrics, serve_probes, server_probe
from fairque.engine.outage import OUTAGE, server_label
from fairque.errors import FairQueueError
from fairque.metrics import PROBE_TIMEOUT, Metrics, Probe
from fairque.runners.manager import Manager, serve_manager
from fairque.runners.storage_worker import StorageWorker, StorageWorkerConfig, serve
from fairque.storage import TarantoolStorage
from fairque.storage.connect import is_tarantool, open_async_storage, open_storage
from fairque.storage.contract import Contract

STORAGE_OPTION = typer.Option(
    None,
    "--storage",
    envvar="FAIRQUE_STORAGE",
    metavar="URL",
    help="Storage URL: tarantool://host:port, or a Redis URL (default: --url).",
)


def storage_probe(target: str | None, namespace: str) -> Probe:
    """Readiness: the storage's server answers in time (Redis / Valkey: ``PING``;
    Tarantool: a stats call)."""
    if not is_tarantool(target):
        return server_probe(target)
    timeouts = {"connect_timeout": PROBE_TIMEOUT, "request_timeout": PROBE_TIMEOUT}
    return TarantoolStorage(target, namespace, **timeouts).get_stat


def storage_worker(
    contract: Path = typer.Option(..., "--contract", metavar="FILE", help="Queue-contract YAML."),
    handlers: str = typer.Option(
        ...,
        "--handlers",
        metavar="MODULE:NAME",
        help="A mapping of queue name (or number) to handler, imported from the current "
        "directory too.",
    ),
    config: Path | None = typer.Option(
        None, "--config", "-c", metavar="FILE", help="Storage worker YAML."
    ),
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    metrics_port: int | None = METRICS_PORT_OPTION,
    health_port: int | None = HEALTH_PORT_OPTION,
    monitoring_host: str = MONITORING_HOST_OPTION,
    manager: float = typer.Option(
        0.0,
        "--manager",
        min=0,
        metavar="SECONDS",
        help="Also run a Manager here, every SECONDS (0: none; see storage-manager).",
    ),
    storage: str | None = STORAGE_OPTION,
    worker_id: str | None = typer.Option(
        None,
        "--worker-id",
        metavar="ID",
        help="Name on the Manager's board (default: host-pid-random).",
    ),
    _log_format: str = LOG_FORMAT_OPTION,
) -> None:
    """Run contract handlers over numbered queues until SIGTERM / SIGINT."""
    target = storage or url
    try:
        queues = Contract.load(contract)
        settings = StorageWorkerConfig.load(config) if config else StorageWorkerConfig()
        watched = open_storage(target, namespace) if metrics_port is not None else None
    except FairQueueError as exc:
        raise fail(str(exc)) from None
    table = _handlers(handlers)
    metrics = Metrics()
    probe = storage_probe(target, namespace)
    if watched is not None:
        metrics.watch_storage(watched)
        serve_metrics(metrics, metrics_port or 0, probe, monitoring_host)
    serve_probes(probe, health_port, host=monitoring_host)

    setup_logging()
    served = ", ".join(
        f"{queue.name} ({number})"
        for number, queue in queues.queues.items()
        if queue.name in table or number in table
    )
    announce(
        "storage-worker",
        f"storage {_storage_name(target)}",
        f"namespace {namespace}",
        f"queues {served or 'none with a handler'}",
        f"{settings.max_processors} processor(s)",
        f"id {worker_id}" if worker_id else "",
    )

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
        raise fail(str(exc)) from None
    done = sum(stats.processed for stats in worker.stats.values())
    say(f"fairque storage-worker: stopped after {done} processed task(s)")


def storage_manager(
    storage: str | None = STORAGE_OPTION,
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    interval: float = typer.Option(
        5.0, "--interval", min=0.01, max=3600, metavar="SECONDS", help="Seconds between rounds."
    ),
    once: bool = typer.Option(False, "--once", help="One round: print the plan and exit."),
    health_port: int | None = HEALTH_PORT_OPTION,
    monitoring_host: str = MONITORING_HOST_OPTION,
    _log_format: str = LOG_FORMAT_OPTION,
) -> None:
    """Steer storage workers in every process: publish processors per queue per worker.

    Prints each new plan as one JSON line ({worker id: [queue of each processor]}) and
    runs until SIGTERM / SIGINT.
    """

    def show(plan: dict[str, list[int]]) -> None:
        typer.echo(json.dumps(plan, sort_keys=True))

    async def run() -> None:
        async with open_async_storage(target, namespace) as opened:
            if once:
                show(await Manager(opened).rebalance())
            else:
                await serve_manager(opened, interval, show)

    target = storage or url
    if not once:
        serve_probes(storage_probe(target, namespace), health_port, True, monitoring_host)
        setup_logging()
        announce("storage-manager", f"storage {_storage_name(target)}",
                 f"namespace {namespace}", f"a plan every {interval:g} s on stdout")  # fmt: skip
    try:
        asyncio.run(run())
    except OUTAGE as exc:  # --once on an unreachable server (a Manager that runs retries)
        raise fail(f"storage unreachable: {' '.join(str(exc).split())}") from None
    except FairQueueError as exc:
        raise fail(str(exc)) from None
    if not once:
        say("fairque storage-manager: stopped (its last plan stays in place)")


def _storage_name(target: str | None) -> str:
    if target and target.startswith("tarantool://"):
        return server_label(target)
    return server_name(target)


def _handlers(spec: str) -> Any:
    """The mapping ``module:attribute`` names."""
    module_name, _, attribute = spec.partition(":")
    module = import_module(module_name, "--handlers")
    table = getattr(module, attribute or "HANDLERS", None)
    if not isinstance(table, Mapping):
        raise fail(f"--handlers {spec}: expected a mapping of queue to handler")
    return table


def register(app: Typer) -> None:
    """Adds this module's commands to ``app``."""
    app.command("storage-worker")(storage_worker)
    app.command("storage-manager")(storage_manager)
