# Generated from fairque/runners/fair_worker/context.py by tools/unasync.py: edit that file instead.
"""What a running task function can reach: which task it is, XCom, its progress and log
lines (kept with the task: ``fairque task get``, the Web UI's task page), and whether it
was canceled while it runs.

A task function that has a parameter named ``context`` receives its context: an async
function the one of :mod:`fairque.runners.fair_worker.context`, written by hand; a sync
function, which runs on a thread, the one of :mod:`fairque.runners.fair_worker.sync_context`,
generated from it (``tools/unasync.py``): the same methods, without ``await``.

>>> @task(task_id="transform", depends_on=["extract"])
... def transform(context: SyncTaskContext) -> int:
...     records = context.xcom_pull("extract", "records", default=[])
...     context.xcom_push("count", len(records))
...     context.progress(100, f"{len(records)} records")
...     return len(records)
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from fairque.queue.client import Queue
from fairque.queue.models import LeasedTask


@dataclass(frozen=True)
class SyncTaskContext:
    """The context of a task function."""

    task: LeasedTask
    queue: Queue
    # Set by the worker when the task is canceled while it runs (or its lease is lost).
    cancel_event: threading.Event = field(default_factory=threading.Event, kw_only=True)

    @property
    def cancelled(self) -> bool:
        """True once the task was canceled while it runs. A sync function on a thread
        cannot be stopped from outside: a long one checks this now and then and returns
        early (what it returns then is dropped; the task is CANCELED already)."""
        return self.cancel_event.is_set()

    @property
    def run_id(self) -> str | None:
        """The pipeline run this task belongs to (ids ``<run>.<step>``), if any."""
        run, dot, _ = self.task.task_id.partition(".")
        return run if dot else None

    def resolve(self, task_id: str) -> str:
        """A task id; a name without a dot is a step of this task's pipeline run."""
        if self.run_id is not None and "." not in task_id:
            return f"{self.run_id}.{task_id}"
        return task_id

    def xcom_push(self, key: str, value: Any, ttl: float | None = None) -> None:
        """Stores ``value`` under ``key`` for this task's dependents."""
        self.queue.xcom_push(self.task.task_id, key, value, ttl)

    def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Any:
        """What task (or step) ``task_id`` stored under ``key``, else ``default``."""
        return self.queue.xcom_pull(self.resolve(task_id), key, default)

    def progress(self, value: float, message: str = "") -> None:
        """Records how far the task is (any number: a percentage, a count) and a short
        message (200 characters kept)."""
        self.queue.report(self.task, value, message)

    def log(self, *lines: str) -> None:
        """Adds log lines to the task's record (the newest 100 kept, 1,000 characters
        each)."""
        self.queue.report(self.task, lines=lines)
