"""``fairque tarantool``: a Tarantool server for the numbered queues' storage, run in the
foreground the way ``fairque server`` keeps the embedded Valkey."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import typer

from fairque.cli.common import Typer, announce, fail, say
from fairque.cli.serving import listen
from fairque.servers import embedded
from fairque.servers.local_tarantool import LocalTarantool, TarantoolNotStarted, find_binary

DEFAULT_PORT = 3301
MEMORY_ENV = "FAIRQUE_TARANTOOL_MEMORY"
USER_ENV = "FAIRQUE_TARANTOOL_USER"
PASSWORD_ENV = "FAIRQUE_TARANTOOL_PASSWORD"  # noqa: S105 - the variable's name
WATCH_INTERVAL = 0.5  # seconds between looks at the server process while it runs


def tarantool(
    host: str = typer.Option(
        "127.0.0.1",
        "--host",
        metavar="HOST",
        help="Address to listen on; beyond loopback it needs --user (and its password).",
    ),
    port: int = typer.Option(
        DEFAULT_PORT,
        "--port",
        min=0,
        max=65535,
        metavar="PORT",
        help="Port to listen on (0: any free one).",
    ),
    data: Path | None = typer.Option(
        None,
        "--data",
        metavar="FOLDER",
        help="Snapshots and write-ahead log, made if missing (default: $FAIRQUE_HOME/tarantool).",
    ),
    memory: int = typer.Option(
        256,
        "--memory",
        min=32,
        max=1024 * 1024,
        envvar=MEMORY_ENV,
        metavar="MIB",
        help="Memory for the tasks, in MiB; when it is full, puts are refused.",
    ),
    user: str | None = typer.Option(
        None,
        "--user",
        envvar=USER_ENV,
        metavar="NAME",
        help=f"The user clients log in as; its password comes from ${PASSWORD_ENV}.",
    ),
) -> None:
    """Run a Tarantool server for the numbered queues' storage until SIGTERM / SIGINT.

    Clients may call fairque's stored function and nothing else; the admin console is the
    socket admin.sock in the data folder.
    """
    binary = find_binary()
    if binary is None:
        raise fail("no tarantool on PATH: install Tarantool 2.6 or newer (Debian: tarantool)")
    login = None
    if user is not None:
        password = os.environ.get(PASSWORD_ENV)
        if not password:
            raise fail(f"--user {user}: set its password in ${PASSWORD_ENV}")
        login = (user, password)
    listening = listen(host, port)  # a taken port: one line, before anything starts
    port = listening.getsockname()[1]
    listening.close()
    folder = data or embedded.home() / "tarantool"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise fail(f"--data {folder}: cannot make the folder ({exc.strerror})") from None
    server = LocalTarantool(
        binary, folder.resolve(), user=login, memory_mib=memory, host=host, port=port
    )
    try:
        server.start()
    except TarantoolNotStarted as exc:
        raise fail(str(exc)) from None
    announce(
        "tarantool",
        f"tarantool://{server.address}",
        f"data folder {folder}",
        f"memory {memory} MiB",
        f"clients log in as {user}" if user else "clients come as guest (loopback only)",
    )
    _serve(server)


def _serve(server: LocalTarantool) -> None:
    """Waits for SIGTERM / SIGINT, or for the server to end by itself, then stops it."""
    stopping = threading.Event()
    previous = {
        signum: signal.signal(signum, lambda _signum, _frame: stopping.set())
        for signum in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        while not stopping.wait(WATCH_INTERVAL):
            if server.process is None or server.process.poll() is not None:
                raise fail(f"tarantool ended by itself: {server.last_words()}")
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        server.stop()
    say("fairque tarantool: stopped")


def register(app: Typer) -> None:
    """Adds this module's command to ``app``."""
    app.command("tarantool")(tarantool)
