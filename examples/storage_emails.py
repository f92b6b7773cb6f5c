"""Contract workers on numbered queues, in one process.

    uv run python examples/storage_emails.py          # in-memory storage
    uv run python examples/storage_emails.py --redis  # embedded Valkey / $FAIRQUE_REDIS_URL
    uv run python examples/storage_emails.py --storage tarantool://127.0.0.1:3301

Puts 30 emails and 10 text messages, runs a worker with two job processors until every
task is done, and prints what the handlers reported (``storage_handlers.py``: every
email whose subject ends in 0 fails once and is retried with backoff).
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

from storage_handlers import HANDLERS

from fairque.runners.storage_worker import StorageWorker, StorageWorkerConfig
from fairque.storage import AsyncMemoryStorage, AsyncStorage
from fairque.storage.connect import open_async_storage
from fairque.storage.contract import Contract

CONTRACT = Contract.load(Path(__file__).with_name("queues.yaml"))


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
    worker = StorageWorker(storage, CONTRACT, HANDLERS, config)
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
