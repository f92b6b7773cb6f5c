"""What every ``fairque`` command shares: options, output, and how a command fails."""

from __future__ import annotations

import importlib
import ipaddress
import json
from typing import Any

import typer
from rich.console import Console

from fairque.config import URL_ENV
from fairque.metrics import Metrics

console = Console()
errors = Console(stderr=True)

URL_OPTION = typer.Option(None, envvar=URL_ENV, help="Server URL (default: embedded Valkey).")
NAMESPACE_OPTION = typer.Option("default", envvar="FAIRQUE_NAMESPACE", help="Queue namespace.")
SHARDS_OPTION = typer.Option(
    1, min=1, max=1024, envvar="FAIRQUE_SHARDS", help="Shards of a sharded queue (1: not sharded)."
)
TOKEN_OPTION = typer.Option(
    None, envvar="FAIRQUE_MASTER_TOKEN", help="Bearer token (required off loopback)."
)
METRICS_PORT_OPTION = typer.Option(
    None, min=0, max=65535, help="Serve Prometheus metrics on 127.0.0.1:PORT (0: any)."
)


def fail(message: str) -> typer.Exit:
    """Prints ``message`` as the command's one-line error; raise what it returns (exit 2)."""
    errors.print(f"[red]error:[/red] {message}", soft_wrap=True)  # one line, however long
    return typer.Exit(2)


def parse_json(text: str | None, option: str) -> Any:
    """The JSON value an option holds (None stays None); a clear error if it is not JSON."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(f"{option}: not valid JSON ({exc})") from None


def import_module(module: str, option: str) -> Any:
    """Imports ``module`` (so that its ``@task`` functions register themselves)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise fail(f"{option} {module}: {exc}") from None


def is_loopback(host: str) -> bool:
    """True if ``host`` is a loopback address (a server there needs no token)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_token_off_loopback(host: str, token: str | None) -> None:
    """Refuses to serve off loopback without a bearer token."""
    if not token and not is_loopback(host):
        raise fail(f"--host {host}: set a token (--token or $FAIRQUE_MASTER_TOKEN) off loopback")


def serve_metrics(metrics: Metrics, port: int) -> None:
    """Serves ``metrics`` on 127.0.0.1:``port`` and says where."""
    server = metrics.serve(port)
    console.print(f"metrics on http://127.0.0.1:{server.port}/metrics")
