"""Hooks around each task a worker runs: where Sentry, a logging context, tracing or your
own metrics plug in, without forking the worker (``Worker(config, hooks=MyHooks())``, or
``fairque worker --hooks myapp.hooks:MyHooks``).

>>> class Timing(WorkerHooks):  # doctest: +SKIP
...     def on_success(self, task, result, seconds):
...         statsd.timing(f"task.{task.name}", seconds)
"""

from __future__ import annotations

import importlib
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from fairque.errors import InvalidInput
from fairque.queue.models import LeasedTask


class WorkerHooks:
    """Override what you need. The worker calls each hook in its event loop, once per
    attempt; a hook that raises is logged (with the task's fields) and changes nothing for
    the task."""

    def around_run(self, task: LeasedTask) -> AbstractContextManager[Any]:
        """A context manager around the function's run: entered before it starts, left
        once it has ended. An async function runs inside it; a sync one on a thread sees
        the context variables set on entering (a span, a logging context); one in a task
        process does not."""
        return nullcontext()

    def on_success(self, task: LeasedTask, result: Any, seconds: float) -> None:
        """The function returned ``result`` after ``seconds``."""

    def on_retry(self, task: LeasedTask, error: str, seconds: float) -> None:
        """The attempt failed with ``error``; the task comes back after its backoff."""

    def on_failure(self, task: LeasedTask, error: str, seconds: float) -> None:
        """The attempt failed with ``error`` and the task failed for good (no retry left,
        or an error that is not retried)."""

    def on_cancel(self, task: LeasedTask, seconds: float) -> None:
        """The task was canceled while it ran, and its run stopped after ``seconds``."""


def load_hooks(spec: str) -> WorkerHooks:
    """The hooks ``MODULE:NAME`` names: a :class:`WorkerHooks` subclass (made with no
    arguments) or an instance; :class:`InvalidInput` naming what is wrong otherwise."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise InvalidInput("hooks", f"{spec!r}: give MODULE:NAME")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidInput("hooks", f"{spec}: {exc}") from None
    found = getattr(module, attribute, None)
    if isinstance(found, type) and issubclass(found, WorkerHooks):
        found = found()
    if not isinstance(found, WorkerHooks):
        raise InvalidInput("hooks", f"{spec}: not a WorkerHooks subclass or instance")
    return found
