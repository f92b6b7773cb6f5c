"""``fairque master``, ``dashboard`` and ``http-worker``: the HTTP services."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import typer

from fairque.cli.common import (
    NAMESPACE_OPTION,
    SHARDS_OPTION,
    TOKEN_OPTION,
    URL_OPTION,
    fail,
    import_module,
    require_token_off_loopback,
)
from fairque.errors import FairQueueError


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
    app = create_master(config)
    if openapi is not None:
        from fairque.http.openapi import openapi_document

        openapi.write_text(json.dumps(openapi_document(app), indent=2) + "\n")
        return
    require_token_off_loopback(host, token)
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="warning")


def dashboard(
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8081, min=0, max=65535, help="Port to bind."),
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    shards: int = SHARDS_OPTION,
    token: str | None = TOKEN_OPTION,
) -> None:
    """Serve the Web UI alone (at /ui), reading the queue at URL."""
    from fairque.http.ui import DashboardConfig, UiConfig, create_dashboard

    require_token_off_loopback(host, token)
    import uvicorn

    config = DashboardConfig(UiConfig(url=url, namespace=namespace, shards=shards), token=token)
    uvicorn.run(create_dashboard(config), host=host, port=port, log_level="warning")


def http_worker(
    master_url: str | None = typer.Option(None, "--master", help="The master's URL."),
    tasks: list[str] = typer.Option([], "--tasks", "-t", help="Module defining @task functions."),
    host: str = typer.Option("127.0.0.1", help="Address to bind."),
    port: int = typer.Option(8081, min=1, max=65535, help="Port to bind."),
    public_url: str | None = typer.Option(None, "--url", help="URL the master reaches us at."),
    capacity: int = typer.Option(4, min=1, max=1000, help="Jobs run at once."),
    worker_id: str | None = typer.Option(None, help="Worker id (default: host-port)."),
    token: str | None = TOKEN_OPTION,
    openapi: Path | None = typer.Option(
        None, help="Write the worker API's OpenAPI document here and exit."
    ),
) -> None:
    """Run @task functions for a JQ master, behind the seed 003 worker API."""
    from fairque.http.worker import HttpWorkerConfig, create_http_worker, worker_api
    from fairque.worker import registry

    if openapi is not None:
        from fairque.http.openapi import openapi_document

        openapi.write_text(json.dumps(openapi_document(worker_api()), indent=2) + "\n")
        return
    if master_url is None:
        raise fail("--master is required: the master's URL")

    for module in tasks:
        import_module(module, "--tasks")
    config = HttpWorkerConfig(
        master=master_url,
        url=public_url or f"http://{host}:{port}",
        worker_id=worker_id or f"{socket.gethostname()}-{port}",
        capacity=capacity,
        token=token,
    )
    require_token_off_loopback(host, token)
    try:
        app = create_http_worker(config, registry)
    except FairQueueError as exc:
        raise fail(str(exc)) from None
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="warning")


def register(app: typer.Typer) -> None:
    """Adds this module's commands to ``app``."""
    app.command()(master)
    app.command()(dashboard)
    app.command("http-worker")(http_worker)
