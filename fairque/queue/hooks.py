"""Hooks around what a client pushes: where tracing, a request id or your own metrics
plug in on the producer's side (``FairQueue(url, hooks=MyHooks())``); the worker's side
is :class:`~fairque.worker.WorkerHooks`.

>>> class RequestId(ClientHooks):  # doctest: +SKIP
...     def before_push(self, task):
...         return task.model_copy(update={"headers": {**task.headers, "request": rid.get()}})
"""

from __future__ import annotations

from fairque.queue.models import Task


class ClientHooks:
    """Override what you need. A hook runs in the caller's code, before anything is sent,
    so one that raises makes the push raise (``push_many``: nothing of it is pushed),
    unlike a worker hook, which is logged."""

    def before_push(self, task: Task) -> Task:
        """The task to push in place of ``task``, once per task (``push`` and
        ``push_many``): the same one, or a copy with other ``headers`` (a trace
        context)... A copy made with ``model_copy`` is not validated; its headers are
        checked when it is pushed."""
        return task
