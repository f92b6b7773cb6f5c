"""The ``fairque`` command: one module per command group, options shared in ``common``.

- :mod:`~fairque.cli.queue`: ``worker``, ``push``, ``stats``, ``demo``
- :mod:`~fairque.cli.tasks`: ``task get|result|cancel|retry``, ``tasks``
- :mod:`~fairque.cli.bulk`: ``bulk retry|cancel|delete|empty``
- :mod:`~fairque.cli.tenants`: ``tenant show|set|pause|resume``, ``tenants``
- :mod:`~fairque.cli.scheduler`: ``scheduler add|update|remove|pause|resume|list|show|
  health|run``
- :mod:`~fairque.cli.http`: ``master``, ``dashboard``, ``http-worker``
- :mod:`~fairque.cli.storage`: ``storage-worker``, ``storage-manager``
- :mod:`~fairque.cli.server`: ``server status|stop``
- :mod:`~fairque.cli.tarantool`: ``tarantool``
- :mod:`~fairque.cli.settings`: ``settings show|set``, ``upgrade``
"""

from __future__ import annotations

import sys
from importlib.metadata import version

import typer
from rich.markup import escape

from fairque.cli import (
    bulk,
    http,
    queue,
    scheduler,
    server,
    settings,
    storage,
    tarantool,
    tasks,
    tenants,
)
from fairque.cli.common import DEBUG_ENV, State, Typer, errors, finish_help
from fairque.cli.examples import EXAMPLES
from fairque.engine.settings import DATA_FORMAT

app = Typer(
    help="fairque: a task queue that is fair between tenants, on Redis or Valkey.",
    no_args_is_help=True,
    rich_markup_mode=None,  # plain help: option values by name (URL, N...), not by type
    pretty_exceptions_enable=False,  # --debug prints Python's own traceback
)


def _print_version(given: bool) -> None:
    if given:
        typer.echo(f"fairque {version('fairque')} (data format {DATA_FORMAT})")
        raise typer.Exit


@app.callback()
def options(
    debug: bool = typer.Option(
        False, "--debug", envvar=DEBUG_ENV, help="Show the traceback of an error."
    ),
    _version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the release and the data format it reads and writes, and exit.",
    ),
) -> None:
    """fairque: a task queue that is fair between tenants, on Redis or Valkey.

    Every command takes --url (or $FAIRQUE_REDIS_URL; default: the embedded Valkey) and
    --namespace (or $FAIRQUE_NAMESPACE). An error is one line on stderr, exit code 2.
    """
    State.debug = debug


queue.register(app)
tasks.register(app)
bulk.register(app)
tenants.register(app)
storage.register(app)
tarantool.register(app)
http.register(app)
app.add_typer(scheduler.app, name="scheduler")
app.add_typer(server.app, name="server")
app.add_typer(settings.app, name="settings")
settings.register(app)
finish_help(app, EXAMPLES)


def main() -> None:
    """Entry point of the ``fairque`` script. Usage errors are one line too."""
    try:
        returned = app(standalone_mode=False)
    except typer.Abort:
        sys.exit(1)
    except typer.TyperException as exc:  # click's usage errors (typer carries its own click)
        if type(exc).__name__ == "NoArgsIsHelpError":  # no arguments: its message is the help
            typer.echo(exc.format_message())
            sys.exit(0)
        message = " ".join(str(getattr(exc, "format_message", exc.__str__)()).split())
        if message:  # empty: the help was printed (no arguments given)
            errors.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True, highlight=False)
        sys.exit(getattr(exc, "exit_code", 2))
    sys.exit(returned if isinstance(returned, int) else 0)
