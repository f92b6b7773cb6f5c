"""The ``fairque`` command: one module per command group, options shared in ``common``.

- :mod:`~fairque.cli.queue`: ``worker``, ``push``, ``stats``, ``demo``
- :mod:`~fairque.cli.scheduler`: ``scheduler add|update|remove|pause|resume|list|show|
  health|run``
- :mod:`~fairque.cli.http`: ``master``, ``dashboard``, ``http-worker``
- :mod:`~fairque.cli.storage`: ``storage-worker``, ``storage-manager``
- :mod:`~fairque.cli.server`: ``server status|stop``
- :mod:`~fairque.cli.settings`: ``settings show|set``
"""

from __future__ import annotations

import typer

from fairque.cli import http, queue, scheduler, server, settings, storage

app = typer.Typer(
    help="fairque: a task queue that is fair between tenants, on Redis or Valkey.",
    no_args_is_help=True,
)
queue.register(app)
storage.register(app)
http.register(app)
app.add_typer(scheduler.app, name="scheduler")
app.add_typer(server.app, name="server")
app.add_typer(settings.app, name="settings")


def main() -> None:
    """Entry point of the ``fairque`` script."""
    app()
