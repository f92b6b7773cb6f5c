"""The ``fairque`` command."""

from __future__ import annotations

import typer
from rich.console import Console

from fairque import demo as demo_module
from fairque import embedded

app = typer.Typer(
    help="fairque: a task queue that is fair between tenants, on Redis or Valkey.",
    no_args_is_help=True,
)
server_app = typer.Typer(help="The embedded Valkey server used when no URL is given.")
app.add_typer(server_app, name="server")
console = Console()


@app.command()
def demo(
    url: str | None = typer.Option(None, help="Server URL (default: a throwaway Valkey)."),
    tenants: int = typer.Option(5, min=2, max=100, help="Tenants, one of them heavy."),
    tasks: int = typer.Option(300, min=10, max=1_000_000, help="Tasks in all."),
) -> None:
    """Show fairness: small tenants finish early although a heavy one pushed first."""
    demo_module.run(url, tenants, tasks, console)


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
