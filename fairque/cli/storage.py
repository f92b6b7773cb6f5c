"""``fairque storage-worker``: contract handlers over numbered queues (seed 004)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import typer

from fairque.cli.common import (
    METRICS_PORT_OPTION,
    NAMESPACE_OPTION,
    URL_OPTION,
    console,
    fail,
    import_module,
    serve_metrics,
)
from fairque.errors import FairQueueError
from fairque.metrics import Metrics
from fairque.storage import AsyncRedisStorage, RedisStorage
from fairque.storage.contract import Contract
from fairque.storage.worker import StorageWorker, StorageWorkerConfig, serve


def storage_worker(
    contract: Path = typer.Option(..., "--contract", help="Queue-contract YAML (seed 004)."),
    handlers: str = typer.Option(
        ..., help="module:attribute, a mapping of queue name (or number) to handler."
    ),
    config: Path | None = typer.Option(None, "--config", "-c", help="Storage worker YAML."),
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    metrics_port: int | None = METRICS_PORT_OPTION,
    manager: float = typer.Option(0.0, min=0, help="Rebalance every N s (0: round robin)."),
) -> None:
    """Run contract handlers over numbered queues until SIGTERM / SIGINT."""
    try:
        queues = Contract.load(contract)
        settings = StorageWorkerConfig.load(config) if config else StorageWorkerConfig()
    except FairQueueError as exc:
        raise fail(str(exc)) from None
    table = _handlers(handlers)
    metrics = Metrics()
    if metrics_port is not None:
        metrics.watch_storage(RedisStorage(url, namespace))
        serve_metrics(metrics, metrics_port)

    async def run() -> StorageWorker:
        async with AsyncRedisStorage(url, namespace) as storage:
            return await serve(
                storage, queues, table, settings, metrics=metrics, manager_interval=manager
            )

    try:
        worker = asyncio.run(run())
    except FairQueueError as exc:
        raise fail(str(exc)) from None
    done = sum(stats.processed for stats in worker.stats.values())
    console.print(f"stopped after {done} processed task(s)")


def _handlers(spec: str) -> Any:
    """The mapping ``module:attribute`` names."""
    module_name, _, attribute = spec.partition(":")
    module = import_module(module_name, "--handlers")
    table = getattr(module, attribute or "HANDLERS", None)
    if not isinstance(table, Mapping):
        raise fail(f"--handlers {spec}: expected a mapping of queue to handler")
    return table


def register(app: typer.Typer) -> None:
    """Adds this module's commands to ``app``."""
    app.command("storage-worker")(storage_worker)
