"""``fairque server``: the embedded Valkey used when no URL is given."""

from __future__ import annotations

import typer

from fairque.cli.common import Typer, warn
from fairque.servers import embedded

app = Typer(help="The embedded Valkey server used when no URL is given.")


@app.command("status")
def status() -> None:
    """Is the embedded server of $FAIRQUE_HOME running? Exit 0 if it is, 1 if not."""
    folder = embedded.home()
    pid = embedded.server_pid(folder)
    if pid is None:
        typer.echo(f"not running (data folder {folder})")
        raise typer.Exit(1)
    clients = embedded.attached_clients(folder)
    attached = "" if clients is None else f", {clients} client(s) attached"
    typer.echo(f"running, pid {pid}, socket {folder / embedded.SOCKET_NAME}{attached}")


@app.command("stop")
def stop() -> None:
    """Stop the embedded server (its data stays on disk); warns if clients are attached."""
    folder = embedded.home()
    clients = embedded.attached_clients(folder)
    if clients:
        warn(
            f"{clients} client(s) attached (workers, pushers, a dashboard?): they lose the "
            "server until something starts it again"
        )
    stopped = embedded.stop_server(folder)
    typer.echo("stopped" if stopped else "was not running")
