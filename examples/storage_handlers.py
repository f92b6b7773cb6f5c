"""Handlers for the queues of ``examples/queues.yaml``, as ``fairque storage-worker`` takes
them (``--handlers storage_handlers:HANDLERS``, run from this folder or with it on
``PYTHONPATH``); ``storage_emails.py`` runs them in one process.

Every email whose subject ends in 0 fails its first try and is retried with exponential
backoff from its ``attempts``.
"""

from __future__ import annotations

from typing import Any

from fairque.runners.storage_worker import Handler, HandlerStats
from fairque.storage import AsyncStorage, RetryInfo


async def handle_emails(storage: AsyncStorage, tasks: list[Any]) -> HandlerStats:
    stats, done, retries = HandlerStats(), [], []
    for task in tasks:
        if task.subject.endswith("0") and task.attempts == 0:  # the first try fails
            retries.append(RetryInfo.after(task.task_id, 0.05 * 2**task.attempts))
            stats.errors, stats.last_error = stats.errors + 1, f"{task.to}: mailbox busy"
        else:
            done.append(task.task_id)
            stats.processed += 1
    await storage.done_task(done)
    stats.retried = await storage.retry_task(retries)
    return stats


async def handle_sms(storage: AsyncStorage, tasks: list[Any]) -> HandlerStats:
    await storage.done_task([task.task_id for task in tasks])
    return HandlerStats(processed=len(tasks))


HANDLERS: dict[int | str, Handler] = {"emails": handle_emails, "sms": handle_sms}
