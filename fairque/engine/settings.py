"""A namespace's settings, held by the server (design section 2).

Every script of a namespace reads the settings it applies (TTLs, backoff, payload limit,
maintenance batch, XCom lifetime) from the namespace's ``settings`` hash, so producers,
workers, the master, the scheduler and the Web UI always agree. A setting nobody wrote
reads as its :class:`~fairque.config.QueueSettings` default. A client created with
``settings=`` writes them before its first call: the last writer wins, and a writer that
changes what another wrote says so in a warning naming each change.

The same hash records the namespace's data format (:data:`DATA_FORMAT`). Every client
writes before its first call to a namespace, settings or not, so that a release that
meets data of a newer format refuses (:class:`~fairque.errors.NewerDataFormat`) before it
writes anything.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from fairque.config import QueueSettings
from fairque.engine.async_executor import AsyncExecutor
from fairque.engine.calls import Arg, Call, default_worker_id
from fairque.engine.executor import Executor
from fairque.engine.fields import MICROS
from fairque.engine.keys import Namespace

log = logging.getLogger("fairque.settings")
FIELDS: tuple[str, ...] = tuple(QueueSettings.model_fields)
# The data format this release reads and writes: the layout of a namespace's keys and
# records. CHANGELOG.md names each change; data from before formats were recorded is 1.
DATA_FORMAT = 2


def _stored(flat: list[bytes]) -> dict[str, str]:
    return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}


def _settings_of(stored: dict[str, str]) -> QueueSettings:
    return QueueSettings.model_validate({name: stored[name] for name in FIELDS if name in stored})


def read(namespace: Namespace) -> Call[QueueSettings]:
    """The namespace's settings (defaults where nothing was written)."""
    return namespace.call(
        "namespace/settings", ("read",), lambda reply: _settings_of(_stored(reply[1]))
    )


def write(
    namespace: Namespace, settings: QueueSettings, writer: str | None = None
) -> Call[QueueSettings]:
    """Writes the settings ``settings`` was given (the others keep what the namespace has);
    parses to what the namespace had before, logging a warning that names each value it
    changed from another writer's."""
    given = settings.model_dump(exclude_unset=True)
    args: list[Arg] = ["write", DATA_FORMAT]
    for name, value in given.items():
        args += [name, repr(value)]
    args.append(writer or default_worker_id())

    def parse(reply: list[Any]) -> QueueSettings:
        stored = _stored(reply[1])
        before = _settings_of(stored)
        changes = [
            f"{name} {getattr(before, name)!r} -> {value!r}"
            for name, value in given.items()
            if name in stored and getattr(before, name) != value
        ]
        if changes:
            when = datetime.fromtimestamp(int(stored["changed_at"]) / MICROS, timezone.utc)
            log.warning(
                "settings of namespace %s: this client changed what %s wrote at %s: %s",
                namespace.name, stored["changed_by"], when.isoformat(timespec="seconds"),
                "; ".join(changes),
            )  # fmt: skip
        return before

    return namespace.call("namespace/settings", args, parse)


def data_format(namespace: Namespace) -> Call[int | None]:
    """The data format the namespace records; None if none is (data written before
    formats were recorded, format 1, or nothing written yet)."""

    def parse(reply: list[Any]) -> int | None:
        recorded = _stored(reply[1]).get("format")
        return None if recorded is None else int(recorded)

    return namespace.call("namespace/settings", ("read",), parse)


def written(namespace: Namespace) -> Call[bool]:
    """Whether any client ever wrote to the namespace (each records the data format at its
    first call), so that a command that only reads can tell a namespace nobody used, a
    mistyped one, without writing there itself."""
    return namespace.call("namespace/settings", ("read",), lambda reply: bool(reply[1]))


def write_on_first_use(
    executor: Executor | AsyncExecutor, namespace: Namespace, settings: QueueSettings | None
) -> None:
    """Has ``executor`` write before its next call to the namespace: the data format, and
    ``settings`` (those it was given, if any)."""
    executor.send_first(namespace.prefix, write(namespace, settings or QueueSettings()))
