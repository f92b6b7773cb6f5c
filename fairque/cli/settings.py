"""``fairque settings show|set``: the settings a namespace's scripts apply, held by the
server for every client of the namespace; ``fairque upgrade``: its data format."""

from __future__ import annotations

import json

import typer
from pydantic import ValidationError

from fairque.cli.common import (
    NAMESPACE_OPTION,
    SHARDS_OPTION,
    URL_OPTION,
    Typer,
    console,
    fail,
    namespaces_of,
    require_data,
)
from fairque.config import QueueSettings
from fairque.engine import settings as settings_store
from fairque.engine.executor import Executor
from fairque.engine.settings import DATA_FORMAT
from fairque.errors import FairQueueError, InvalidInput, NewerDataFormat

app = Typer(help="The settings of a namespace (TTLs, backoff, limits), held by the server.")


@app.command("show")
def show(
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    shards: int = SHARDS_OPTION,
) -> None:
    """The namespace's settings (defaults where nobody wrote one), as JSON."""
    require_data(url, namespace, shards)
    try:
        executor = Executor.connect(url)
        try:
            found = [
                executor.execute(settings_store.read(ns)) for ns in namespaces_of(namespace, shards)
            ]
        finally:
            executor.close()
    except FairQueueError as exc:
        raise fail(str(exc)) from None
    console.print_json(json.dumps(found[0].model_dump()))


@app.command("set")
def set_(
    assignments: list[str] = typer.Argument(
        ..., metavar="KEY=VALUE", help="Settings to change, e.g. finished_ttl=3600."
    ),
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    shards: int = SHARDS_OPTION,
) -> None:
    """Change settings for every client of the namespace (the others keep their values)."""
    given: dict[str, str] = {}
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep or not key:
            raise fail(f"{assignment!r}: expected KEY=VALUE, e.g. finished_ttl=3600")
        given[key] = value
    try:
        settings = QueueSettings.model_validate(given)
    except ValidationError as exc:
        raise fail(str(InvalidInput.from_errors(exc.errors()))) from None
    try:
        executor = Executor.connect(url)
        try:
            for ns in namespaces_of(namespace, shards):
                executor.execute(settings_store.write(ns, settings, writer="fairque settings set"))
        finally:
            executor.close()
    except FairQueueError as exc:
        raise fail(str(exc)) from None
    console.print(f"set {', '.join(f'{k}={v}' for k, v in given.items())} for {namespace}")


def _recorded(found: int | None) -> str:
    return "none recorded (written before formats were, format 1)" if found is None else str(found)


def upgrade(
    url: str | None = URL_OPTION,
    namespace: str = NAMESPACE_OPTION,
    shards: int = SHARDS_OPTION,
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Say what it would change, change nothing."
    ),
) -> None:
    """Bring the namespace's data to this release's format, online (workers may run); safe
    to run again. Every client does it at its first call too: this says what it changes."""
    try:
        executor = Executor.connect(url)
        try:
            for ns in namespaces_of(namespace, shards):
                found = executor.execute(settings_store.data_format(ns))
                if found is not None and found > DATA_FORMAT:
                    raise NewerDataFormat(ns.name, found, DATA_FORMAT)
                if found == DATA_FORMAT:
                    typer.echo(f"{ns.name}: data format {found}, current: nothing to do")
                    continue
                if (found or 1) < 2:
                    typer.echo(f"{ns.name}: format 2 keeps fair tasks in lanes by task name: "
                               "builds their entries from format 1's queues")  # fmt: skip
                change = f"{ns.name}: data format {_recorded(found)} -> {DATA_FORMAT}: records it"
                if dry_run:
                    typer.echo(f"{change} (dry run: nothing written)")
                    continue
                executor.execute(
                    settings_store.write(ns, QueueSettings(), writer="fairque upgrade")
                )
                typer.echo(f"{change}; done")
        finally:
            executor.close()
    except FairQueueError as exc:
        raise fail(str(exc)) from None


def register(root: Typer) -> None:
    root.command("upgrade")(upgrade)
