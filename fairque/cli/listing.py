"""How commands print what they list: tables that never cut a value, lines when piped,
JSON for scripts (``--json``), and times as tables show them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import typer
from rich.measure import Measurement
from rich.table import Table

from fairque.cli.common import console


def when(seconds: float | None) -> str:
    """A time as tables show it: UTC to the second (``--json`` gives epoch seconds)."""
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


@dataclasses.dataclass
class Listing:
    """What a command lists, shown so that no value is ever cut: a table on a terminal
    wide enough for it, one block of ``column  value`` lines per row on a narrower one,
    and plain tab-separated lines (a header, then one line per row) when piped; ``--json``
    is for scripts that want every field."""

    title: str
    columns: Sequence[str]
    right: Sequence[str] = ()  # columns of numbers, right-justified in the table
    caption: str = ""  # under the table (after a blank line when piped)
    rows: list[tuple[str, ...]] = dataclasses.field(default_factory=list)
    sections: set[int] = dataclasses.field(default_factory=set)  # rows a rule goes above

    def add(self, *cells: object, section: bool = False) -> None:
        """Adds a row (its cells as text); ``section`` draws a rule above it."""
        if section:
            self.sections.add(len(self.rows))
        self.rows.append(tuple(str(cell) for cell in cells))

    def table(self) -> Table:
        """The rich table (every value on one line)."""
        table = Table(title=self.title, caption=self.caption or None)
        for column in self.columns:
            table.add_column(column, no_wrap=True,
                             justify="right" if column in self.right else "left")  # fmt: skip
        for number, row in enumerate(self.rows):
            if number in self.sections:
                table.add_section()
            table.add_row(*row)
        return table

    def print(self, empty: str = "") -> None:
        """Prints the listing on stdout (``empty`` instead when there is no row, if given)."""
        if not self.rows and empty:
            typer.echo(empty)
        elif not console.is_terminal:
            lines = ["\t".join(line) for line in (self.columns, *self.rows)]
            if self.caption:
                lines += ["", self.caption]
            typer.echo("\n".join(lines))
        elif self._natural_width() <= console.width:
            console.print(self.table())
        else:
            self._print_records()

    def _natural_width(self) -> int:
        """The width of the table with every value whole (unbounded by the terminal)."""
        unbounded = console.options.update(max_width=1_000_000)
        return Measurement.get(console, unbounded, self.table()).maximum

    def _print_records(self) -> None:
        console.print(self.title, style="italic", highlight=False)
        name_width = max(len(column) for column in self.columns)
        for row in self.rows:
            console.print()
            for column, value in zip(self.columns, row, strict=True):
                console.print(f"{column:<{name_width}}  {value}", highlight=False,
                              markup=False, soft_wrap=True)  # fmt: skip
        if self.caption:
            console.print()
            console.print(self.caption, highlight=False, markup=False, soft_wrap=True)


def print_json(value: Any) -> None:
    """``value`` as JSON on stdout (bytes as text, times as numbers)."""
    typer.echo(json.dumps(value, default=_jsonable, ensure_ascii=False, sort_keys=True))


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)
