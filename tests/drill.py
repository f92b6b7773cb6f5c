"""A failover drill, for the tests that kill servers (a cluster's masters, a Sentinel's
primary): a pusher that waits for one replica, pushing one task a call to 20 tenants, and
a worker running the tasks, with what each push was told and what ran. Verdicts are on
what was acknowledged and what ran, never on timing: every wait is bounded, and ends
early if the worker stopped (a failover must not end it)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from fairque import NotReplicated, QueueSettings
from fairque.queue.async_client import AsyncQueue, open_async_queue
from fairque.worker import Registry, Worker, WorkerConfig, task
from tests.conftest import wait_for

TENANTS = 20
ran: Counter[str] = Counter()  # runs of each task id, by every drill's workers
_ran_lock = threading.Lock()
functions = Registry()


@task(into=functions, name="drill")
def drill_task(task_id: str) -> None:
    with _ran_lock:
        ran[task_id] += 1


@dataclass
class Pusher:
    """Pushes one task at a time, round robin over the tenants, waiting for one replica;
    keeps what each push was told."""

    queue: AsyncQueue
    confirmed: list[str] = field(default_factory=list)
    unconfirmed: list[str] = field(default_factory=list)  # made: its master had no replica
    tenants: dict[str, str] = field(default_factory=dict)  # of each push acknowledged
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            task_id, tenant = uuid.uuid4().hex, f"t{n % TENANTS}"
            n += 1
            pushed = drill_task.build(user_id=tenant, args=[task_id], task_id=task_id)
            try:
                await self.queue.push(pushed, replicas=1, replica_timeout=0.2)
                self.confirmed.append(task_id)
            except NotReplicated:
                self.unconfirmed.append(task_id)
            except Exception:  # not acknowledged: a failover; tried again
                await asyncio.sleep(0.05)
                continue
            self.tenants[task_id] = tenant

    def since(self, known: int, tenants: set[str] | None = None) -> list[str]:
        """The pushes acknowledged after the first ``known`` (to ``tenants``, if given)."""
        later = list(self.tenants)[known:]
        return later if tenants is None else [t for t in later if self.tenants[t] in tenants]


class Drill:
    """A pusher and a worker on the queue at ``url`` (``shards`` > 1: a sharded one), run
    by :meth:`start` until :meth:`finish`. The worker polls every 10 minutes only, past
    every wait of the drill: an idle worker hears of new tasks by its wait or its wake
    channel, which must survive every failover (a wake subscription lost to one once
    left the worker to its poll)."""

    def __init__(self, url: str, namespace: str, shards: int = 1) -> None:
        settings = QueueSettings(retry_backoff_base=0.01)
        self.pusher = Pusher(open_async_queue(url, namespace, shards, settings=settings))
        config = WorkerConfig(
            redis_url=url, namespace=namespace, shards=shards, lease_seconds=2,
            poll_interval_seconds=600, concurrency=20,
        )  # fmt: skip
        self.worker = Worker(config, functions)
        self.tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self.tasks = [asyncio.create_task(self.worker.run_async()),
                      asyncio.create_task(self.pusher.run())]  # fmt: skip

    async def until(self, probe: Callable[[], object], timeout: float = 90.0) -> None:
        """Waits until ``probe()`` is true; fails if the worker stopped meanwhile."""
        running = self.tasks[0]
        await asyncio.to_thread(wait_for, lambda: running.done() or probe(), timeout, 0.05)
        if running.done():  # a failover must not end the worker: show why it did
            running.result()
            pytest.fail("the worker stopped")

    async def resumed(self, known: int, tenants: set[str] | None = None) -> None:
        """Waits until 20 pushes acknowledged after the first ``known`` (to ``tenants``),
        confirmed or not, were made and ran."""
        await self.until(lambda: len(self.pusher.since(known, tenants)) >= 20)
        await self.until(lambda: sum(1 for t in self.pusher.since(known, tenants) if ran[t]) >= 20)

    async def confirmed_again(self) -> None:
        """Waits until 50 more pushes are confirmed (their master has a replica again)."""
        confirmed = len(self.pusher.confirmed)
        await self.until(lambda: len(self.pusher.confirmed) >= confirmed + 50)

    async def finish(self) -> None:
        """Stops pushing, waits until every confirmed push ran (at least once: a lease
        lost to a failover may run a task again) and a push made to the idle worker ran,
        then stops the worker. Unconfirmed
        pushes (made while a master had no replica) are not promised to survive a crash."""
        self.pusher.stop.set()
        await self.tasks[1]
        await self.until(lambda: all(ran[task_id] for task_id in self.pusher.confirmed))
        # The worker idles now, waiting where the failovers moved the queue: it hears of
        # new work there.
        late = uuid.uuid4().hex
        await self.pusher.queue.push(drill_task.build(user_id="late", args=[late], task_id=late))
        await self.until(lambda: ran[late])
        self.worker.stop()
        await self.tasks[0]
        assert [task_id for task_id in self.pusher.confirmed if not ran[task_id]] == []

    async def close(self) -> None:
        """Stops everything, whatever the state (after :meth:`finish`, or a failure)."""
        self.pusher.stop.set()
        self.worker.stop()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.pusher.queue.close()
