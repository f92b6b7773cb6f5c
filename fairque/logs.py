"""How fairque's long-running processes write their log lines on stderr: plain text, or
one JSON object per line (``--log-format json``) for log collectors.

A line about a task carries the task's fields (``log.warning(..., extra=task.log_fields())``);
in JSON they are keys of the line's object: ``task_id``, ``tenant``, ``name`` and
``attempt``, beside ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone
from typing import Any

FORMATS = ("text", "json")
# LogRecord attributes a task's fields travel in, and their keys in a JSON line (a
# record's own ``name`` is the logger's).
TASK_FIELDS = {"task_id": "task_id", "tenant": "tenant", "task_name": "name", "attempt": "attempt"}


class TextLines(logging.Formatter):
    """The message alone; warnings and errors marked ``warning:``."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        return f"warning: {text}" if record.levelno >= logging.WARNING else text


def json_line(level: str, logger: str, message: str, **fields: Any) -> str:
    """One log line as a JSON object (no newline)."""
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
    line = {"time": now, "level": level, "logger": logger, "message": message, **fields}
    return json.dumps(line, default=str)


class JsonLines(logging.Formatter):
    """One JSON object per line, with the task's fields where the line concerns a task."""

    def format(self, record: logging.LogRecord) -> str:
        fields = {
            key: value
            for attribute, key in TASK_FIELDS.items()
            if (value := getattr(record, attribute, None)) is not None
        }
        if record.exc_info:
            fields["traceback"] = self.formatException(record.exc_info)
        return json_line(record.levelname.lower(), record.name, record.getMessage(), **fields)


def setup(log_format: str = "text") -> None:
    """Writes the INFO lines of fairque's loops and everything above on stderr, in
    ``log_format`` (one of :data:`FORMATS`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines() if log_format == "json" else TextLines())
    logger = logging.getLogger("fairque")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
