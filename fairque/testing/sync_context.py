# Generated from fairque/testing/context.py by tools/unasync.py: edit that file instead.
"""A fake task context, to call a task function directly in a test: it records the
function's progress reports, log lines and XCom values instead of sending them, and
lets the test cancel the run.

The one of async functions is written by hand in :mod:`fairque.testing.context`; the one
of sync functions, in :mod:`fairque.testing.sync_context`, is generated from it
(``tools/unasync.py``): the same methods, without ``await``.

>>> context = FakeContext()
>>> resize(640, context=context)  # doctest: +SKIP
>>> context.progress_reports, context.lines  # doctest: +SKIP
([(50.0, 'half')], ['resized'])
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from fairque.queue.client import Queue
from fairque.queue.models import LeasedTask
from fairque.runners.fair_worker.sync_context import SyncTaskContext
from fairque.testing.leased import NO_QUEUE, leased_task


@dataclass(frozen=True)
class FakeContext(SyncTaskContext):
    """A task context that keeps what the function reports. ``task`` is the task it
    runs (a first attempt of ``test-task`` for tenant ``tenant`` unless given);
    ``queue`` is only needed by a function that uses ``context.queue`` itself.
    ``cancel_after``: the run is canceled once the function has reported progress that
    many times (what a worker does when the task is canceled while it runs: a function
    sees ``context.cancelled`` become true)."""

    task: LeasedTask = field(default_factory=leased_task)
    queue: Queue = field(default=cast(Queue, NO_QUEUE))
    cancel_after: int | None = field(default=None, kw_only=True)
    progress_reports: list[tuple[float, str]] = field(default_factory=list, kw_only=True)
    lines: list[str] = field(default_factory=list, kw_only=True)
    xcom: dict[tuple[str, str], Any] = field(default_factory=dict, kw_only=True)

    def cancel(self) -> None:
        """Cancels the run, as ``fairque task cancel`` does while it runs."""
        self.cancel_event.set()

    def xcom_push(self, key: str, value: Any, ttl: float | None = None) -> None:
        """Keeps ``value`` in :attr:`xcom` under (this task's id, ``key``)."""
        self.xcom[self.task.task_id, key] = value

    def xcom_pull(self, task_id: str, key: str, default: Any = None) -> Any:
        """What :attr:`xcom` holds for (task or step ``task_id``, ``key``), else
        ``default``: put a dependency's values there before the call."""
        return self.xcom.get((self.resolve(task_id), key), default)

    def progress(self, value: float, message: str = "") -> None:
        """Appends (value, message) to :attr:`progress_reports`."""
        self.progress_reports.append((value, message))
        if self.cancel_after is not None and len(self.progress_reports) >= self.cancel_after:
            self.cancel()

    def log(self, *lines: str) -> None:
        """Appends the lines to :attr:`lines`."""
        self.lines.extend(lines)
