"""``fairque master``, ``dashboard`` and ``http-worker``: the HTTP services.

Default ports, one per command so that all three run side by side on one host:
master 8080, dashboard 8081, http-worker 8082.
"""

from __future__ import annotations

import json
import signal
import socket
import urllib.parse
from pathlib import Path
from typing import Any

import typer

from fairque.cli.common import (
    HOST_HELP,
    LOG_FORMAT_OPTION,
    NAMESPACE_OPTION,
    SHARDS_OPTION,
    TOKEN_OPTION,
    URL_OPTION,
    Typer,
    announce,
    fail,
    import_module,
    refuse_newer_format,
    say,
    server_name,
    setup_logging,
    unreachable,
    warn,
)
from fairque.cli.queue import TASKS_OPTION
from fairque.cli.serving import listen, require_token_off_loopback

MASTER_PORT, DASHBOARD_PORT, HTTP_WORKER_PORT = 8080, 8081, 8082


def _host_option() -> Any:
    return typer.Option("127.0.0.1", "--host", metavar="HOST", help=HOST_HELP)


def _port_option(default: int, envvar: str) -> Any:
    return typer.Option(
        default,
        "--port",
        min=0,
        max=65535,
        envvar=envvar,
        metavar="PORT",
        help="Port to bind (0: any free).",
    )


def _check_server(url: str | None, namespace: str, shards: int = 1) -> str:
    """Says which server a service reads, and warns if it does not answer now: the
    service starts anyway and answers 503 until the server is back. Data of a newer
    format ends the start in one line."""
    name = server_name(url)
    problem = unreachable(url)
    if problem is not None:
        warn(
            f"{problem}; serving anyway: requests that need the server answer 503 until it is back"
        )
    else:
        refuse_newer_format(url, namespace, shards)
    return name


def _serve(app: Any, listening: socket.socket, command: str) -> None:
    """Runs ``app`` under uvicorn on the bound socket until SIGTERM / SIGINT, then says
    it stopped.

    uvicorn shuts down gracefully on the signal and then raises it again under the
    handler that was there before it started: a no-op for SIGTERM and a caught
    KeyboardInterrupt for SIGINT let the command end normally (exit 0, its stop line).
    """
    import uvicorn

    previous = signal.signal(signal.SIGTERM, lambda _signum, _frame: None)
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listening])
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        listening.close()
    say(f"fairque {command}: stopped")


def _where(listening: socket.socket) -> str:
    """The URL of a bound socket, with the port it really has (``--port 0``)."""
    host, port = listening.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def master(
    host: str = _host_option(),
    port: int = _port_option(MASTER_PORT, "FAIRQUE_MASTER_PORT"),
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    shards: int = SHARDS_OPTION,
    token: str | None = TOKEN_OPTION,
    result_ttl: float = typer.Option(
        3600.0, "--result-ttl", min=1, metavar="SECONDS", help="How long a kept result waits."
    ),
    openapi: Path | None = typer.Option(
        None, "--openapi", metavar="FILE", help="Write the OpenAPI document to FILE and exit."
    ),
    _log_format: str = LOG_FORMAT_OPTION,
) -> None:
    """Run the JQ master: HTTP + MessagePack API for pushers, workers and a Web UI.

    With --shards N, jobs are split over N namespaces by their name (a constraint then
    limits each shard's jobs: exact for one that selects by name).
    """
    from fairque.http.master import MasterConfig, create_master

    config = MasterConfig(
        url=url, namespace=namespace, shards=shards, token=token, result_ttl=result_ttl
    )
    app = create_master(config)
    if openapi is not None:
        from fairque.http.openapi import openapi_document

        openapi.write_text(json.dumps(openapi_document(app), indent=2) + "\n")
        return
    require_token_off_loopback(host, token)
    setup_logging()
    listening = listen(host, port)
    server = _check_server(url, namespace, shards)
    where = _where(listening)
    announce(
        "master",
        f"{where} (jobs API, Web UI at {where}/ui, OpenAPI at {where}/schema/openapi.json)",
        f"server {server}",
        f"namespace {namespace}" + (f" ({shards} shards)" if shards > 1 else ""),
        "bearer token required" if token else "",
    )
    _serve(app, listening, "master")


def dashboard(
    host: str = _host_option(),
    port: int = _port_option(DASHBOARD_PORT, "FAIRQUE_DASHBOARD_PORT"),
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    shards: int = SHARDS_OPTION,
    token: str | None = TOKEN_OPTION,
    _log_format: str = LOG_FORMAT_OPTION,
) -> None:
    """Serve the Web UI alone (at /ui), reading the queue at URL."""
    from fairque.http.ui import DashboardConfig, UiConfig, create_dashboard

    require_token_off_loopback(host, token)
    setup_logging()
    listening = listen(host, port)
    server = _check_server(url, namespace, shards)
    config = DashboardConfig(UiConfig(url=url, namespace=namespace, shards=shards), token=token)
    announce(
        "dashboard",
        f"Web UI at {_where(listening)}/ui",
        f"server {server}",
        f"namespace {namespace}" + (f" ({shards} shards)" if shards > 1 else ""),
        "bearer token required" if token else "",
    )
    _serve(create_dashboard(config), listening, "dashboard")


def http_worker(
    master_url: str | None = typer.Option(
        None, "--master", metavar="URL", help="The master's URL (required to serve)."
    ),
    tasks: list[str] = TASKS_OPTION,
    host: str = _host_option(),
    port: int = _port_option(HTTP_WORKER_PORT, "FAIRQUE_HTTP_WORKER_PORT"),
    public_url: str | None = typer.Option(
        None, "--public-url", metavar="URL", help="URL the master reaches us at."
    ),
    capacity: int = typer.Option(
        4, "--capacity", min=1, max=1000, metavar="N", help="Jobs run at once."
    ),
    worker_id: str | None = typer.Option(
        None, "--worker-id", metavar="ID", help="Worker id (default: host-port)."
    ),
    token: str | None = TOKEN_OPTION,
    openapi: Path | None = typer.Option(
        None,
        "--openapi",
        metavar="FILE",
        help="Write the worker API's OpenAPI document here and exit.",
    ),
    _log_format: str = LOG_FORMAT_OPTION,
) -> None:
    """Run @task functions for a JQ master, behind the HTTP worker API."""
    from fairque.http.worker import create_http_worker, worker_api
    from fairque.runners.fair_worker.functions import registry
    from fairque.runners.http_worker import HttpWorkerConfig

    if openapi is not None:
        from fairque.http.openapi import openapi_document

        openapi.write_text(json.dumps(openapi_document(worker_api()), indent=2) + "\n")
        return
    if master_url is None:
        raise fail("--master is required: the master's URL")
    for option, given in (("--master", master_url), ("--public-url", public_url)):
        if given is not None:
            check_http_url(given, option)

    for module in tasks:
        import_module(module, "--tasks")
    require_token_off_loopback(host, token)
    listening = listen(host, port)
    where = _where(listening)
    config = HttpWorkerConfig(
        master=master_url,
        url=public_url or where,
        worker_id=worker_id or f"{socket.gethostname()}-{listening.getsockname()[1]}",
        capacity=capacity,
        token=token,
    )
    app = create_http_worker(config, registry)
    setup_logging()
    names = ", ".join(sorted(registry.functions)) or "no functions (give --tasks)"
    announce(
        "http-worker",
        f"{where} for master {master_url}",
        f"functions {names}",
        f"id {config.worker_id}, capacity {capacity}",
    )
    _serve(app, listening, "http-worker")


def check_http_url(url: str, option: str) -> None:
    """Refuses a URL an HTTP client cannot send to (no http:// or https://, no host), in
    one line, before anything starts: a worker would otherwise warn every second."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise fail(f"{option} {url}: must be an http:// or https:// URL with a host, "
                   "e.g. http://127.0.0.1:8080")  # fmt: skip


def register(app: Typer) -> None:
    """Adds this module's commands to ``app``."""
    app.command()(master)
    app.command()(dashboard)
    app.command("http-worker")(http_worker)
