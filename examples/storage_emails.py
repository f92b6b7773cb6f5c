"""Contract workers on numbered queues (seed 004), in one process.

    uv run python examples/storage_emails.py          # in-memory storage
    uv run python examples/storage_emails.py --redis  # embedded Valkey / $FAIRQUE_REDIS_URL
    uv run python examples/storage_emails.py --storage tarantool://127.0.0.1:3301

Puts 30 emails and 10 text messages, runs a worker with two job processors until every
task is done, and prints what the handlers reported. Every third email fails once and is
retried with exponential backoff from its ``attempts``.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

from fairque.storage import AsyncMemoryStorage, AsyncStorage, RetryInfo
from fairque.storage.connect import open_async_storage
from fairque.storage.contract import Contract
from fairque.storage.worker import HandlerStats, StorageWorker, StorageWorkerConfig

CONTRACT = Contract.load(Path(__file__).with_name("queues.yaml"))


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


async def main(use_server: bool, url: str | None) -> None:
    namespace = f"example-{uuid.uuid4().hex[:8]}"
    opened = open_async_storage(url, namespace) if use_server else None  # Redis or Tarantool
    storage: AsyncStorage = opened or AsyncMemoryStorage()
    emails, sms = CONTRACT.queue("emails"), CONTRACT.queue("sms")
    await storage.put_tasks(
        [
            emails.request({"to": f"user{n}@example.com", "subject": f"#{n}", "body": b"hi"})
            for n in range(30)
        ]
        + [sms.request({"to": f"+100{n}", "text": "hello"}) for n in range(10)]
    )
    config = StorageWorkerConfig(max_processors=2, idle_wait=0.05)
    worker = StorageWorker(storage, CONTRACT, {"emails": handle_emails, "sms": handle_sms}, config)
    running = asyncio.create_task(worker.run())
    while (await storage.get_stat()).queues:  # until every task is done
        await asyncio.sleep(0.05)
    worker.stop()
    await running
    for queue in worker.queues:
        stats = worker.stats[queue.id]
        print(f"{queue.name}: processed {stats.processed}, retried {stats.retried}, "
              f"last error {stats.last_error!r}")  # fmt: skip
    if opened is not None:
        await opened.close()


if __name__ == "__main__":
    url = sys.argv[sys.argv.index("--storage") + 1] if "--storage" in sys.argv else None
    asyncio.run(main("--redis" in sys.argv or url is not None, url))
