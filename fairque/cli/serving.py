"""Where a long-running command listens and what it serves there: its port, refused
with one line when taken, a token off loopback, the metrics and the health probes.
"""

from __future__ import annotations

import functools
import ipaddress
import socket

import typer

from fairque.cli.common import TOKEN_ENV, fail, one_line
from fairque.config import redis_url
from fairque.engine.connect import sync_client
from fairque.metrics import (
    LIVE_PATH,
    PROBE_TIMEOUT,
    READY_PATH,
    Metrics,
    Probe,
    serve_health,
)


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
        raise fail(f"--host {host}: set a token (--token or ${TOKEN_ENV}) off loopback")


def port_taken(option: str, host: str, port: int, exc: OSError) -> typer.Exit:
    """The one-line error for a port the command cannot listen on."""
    reason = exc.strerror or one_line(exc)
    return fail(f"{option} {port}: cannot listen on {host}:{port} ({reason}); choose another port")


def listen(host: str, port: int, option: str = "--port") -> socket.socket:
    """A TCP socket bound to ``host:port`` before the command says it started: a taken
    port ends it with one line, and with port 0 the start line can name the real one."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise fail(f"--host {host}: not an address of this machine ({exc.strerror})") from None
    bound = socket.socket(family, kind, proto)
    bound.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not a listening port's
    try:
        bound.bind(address)
    except OSError as exc:
        bound.close()
        raise port_taken(option, host, port, exc) from None
    return bound


def serve_metrics(
    metrics: Metrics, port: int, probe: Probe | None = None, host: str = "127.0.0.1"
) -> None:
    """Serves ``metrics`` (and ``/livez``, and ``/readyz`` with ``probe``) on
    ``host:port`` and says where, first thing on stdout (port 0 picks a free one: a script
    reads the address there)."""
    try:
        server = metrics.serve(port, host, probe=probe)
    except OSError as exc:
        raise port_taken("--metrics-port", host, port, exc) from None
    typer.echo(f"metrics on http://{host_in_url(host)}:{server.port}/metrics")


def serve_probes(
    probe: Probe, port: int | None, err: bool = False, host: str = "127.0.0.1"
) -> None:
    """With ``--health-port``: answers ``/livez`` and ``/readyz`` on ``host:port`` and
    says where on stdout, as :func:`serve_metrics` does (on stderr with ``err``, for a
    command whose stdout is data)."""
    if port is None:
        return
    try:
        server = serve_health(probe, port, host)
    except OSError as exc:
        raise port_taken("--health-port", host, port, exc) from None
    where = f"http://{host_in_url(host)}:{server.port}"
    typer.echo(f"health on {where}{READY_PATH} and {where}{LIVE_PATH}", err=err)


def host_in_url(host: str) -> str:
    """``host`` as a URL writes it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host


def server_probe(url: str | None) -> Probe:
    """Readiness: the Redis / Valkey server (a cluster's nodes) answers ``PING`` in time.
    The connection is made at the first probe, not now."""
    timeouts = {"socket_timeout": PROBE_TIMEOUT, "socket_connect_timeout": PROBE_TIMEOUT}
    # Made at the first probe: a cluster client connects when it is made.
    client = functools.cache(lambda: sync_client(redis_url(url), **timeouts))
    return lambda: client().ping()
