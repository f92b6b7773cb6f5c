"""``fairque server``: the embedded Valkey used when no URL is given."""

from __future__ import annotations

import typer

from fairque.cli.common import console
from fairque.engine import embedded

app = typer.Typer(help="The embedded Valkey server used when no URL is given.")


@app.command("status")
def status() -> None:
    """Is the embedded server of $FAIRQUE_HOME running?"""
    folder = embedded.home()
    pid = embedded.server_pid(folder)
    if pid is None:
        console.print(f"not running (data folder {folder})")
    else:
        console.print(f"running, pid {pid}, socket {folder / embedded.SOCKET_NAME}")


@app.command("stop")
def stop() -> None:
    """Stop the embedded server (its data stays on disk)."""
    stopped = embedded.stop_server()
    console.print("stopped" if stopped else "was not running")
