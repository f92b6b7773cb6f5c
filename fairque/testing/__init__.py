"""Testing task code: run queued tasks in-process through the real engine, or one task
function directly with a fake context (docs: "Testing your tasks").

- :func:`drain` / :func:`async_drain`: run what is ready or due in a queue, one task at a
  time, with the worker's own code; each attempt comes back as a :class:`Ran`;
- :func:`run_task` / :func:`async_run_task`: call one ``@task`` function as a worker
  would (arguments and result through MessagePack), with a :class:`FakeContext` /
  :class:`AsyncFakeContext` that records progress, log lines and XCom values and can be
  canceled.

The pytest fixtures (a throwaway server per test run, a queue on a fresh namespace per
test) are in :mod:`fairque.testing.plugin`, which pytest loads by itself; this package
does not need pytest.
"""

from fairque.testing.context import AsyncFakeContext
from fairque.testing.drain import Ran, async_drain, drain
from fairque.testing.leased import leased_task
from fairque.testing.run import async_run_task, run_task
from fairque.testing.sync_context import FakeContext

__all__ = [
    "AsyncFakeContext",
    "FakeContext",
    "Ran",
    "async_drain",
    "async_run_task",
    "drain",
    "leased_task",
    "run_task",
]
