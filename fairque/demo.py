"""``fairque demo``: one heavy tenant and many small ones share a queue.

Workers start; tenant "big" floods the queue while small tenants push a little each;
a few critical tasks of "big" arrive mid-flood. A live display shows every tenant's
progress: the small ones finish early instead of waiting behind "big", and the critical
tasks run at big's next turn. With a FIFO queue the small tenants would finish last.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from fairque.config import URL_ENV, QueueSettings
from fairque.queue import AsyncFairQueue
from fairque.queue.models import Priority, Task
from fairque.runners.fair_worker.config import WorkerConfig
from fairque.runners.fair_worker.functions import Registry, task
from fairque.runners.fair_worker.runner import Worker
from fairque.servers.embedded import LocalServer

BIG = "big"
WORKERS = 2
CONCURRENCY = 8
DEMO_SETTINGS = QueueSettings(finished_ttl=600)  # a demo leaves little behind

functions = Registry()


@dataclass
class DemoSummary:
    """What ran, in order: the tenant of each completion, and where the critical ones ran."""

    completions: list[str] = field(default_factory=list)
    critical_positions: list[int] = field(default_factory=list)
    work_seconds: float = 0.0

    def positions(self, tenant: str) -> list[int]:
        """1-based completion positions of ``tenant``'s tasks."""
        return [i for i, name in enumerate(self.completions, 1) if name == tenant]

    def mean_position(self, tenants: list[str]) -> float:
        """The mean completion position of the tasks of ``tenants``."""
        spots = [i for i, name in enumerate(self.completions, 1) if name in tenants]
        return sum(spots) / len(spots)


summary = DemoSummary()  # the demo's task function records into the running demo's summary


@task(into=functions, name="fairque.demo.work")
async def work(tenant: str, critical: bool = False) -> None:
    """Pretends to work for a few milliseconds, then records that it ran."""
    if summary.work_seconds:
        await asyncio.sleep(random.uniform(0.5, 1.5) * summary.work_seconds)
    summary.completions.append(tenant)
    if critical:
        summary.critical_positions.append(len(summary.completions))


@contextlib.contextmanager
def _server_url(url: str | None) -> Iterator[str]:
    """The given server, else a throwaway embedded Valkey (no daemon left behind)."""
    url = url or os.environ.get(URL_ENV)
    if url:
        yield url
        return
    with LocalServer() as server:
        yield server.url


def _job(tenant: str, critical: bool = False) -> Task:
    priority = Priority.CRITICAL if critical else Priority.NORMAL
    return work.build(user_id=tenant, kwargs={"tenant": tenant, "critical": critical},
                      priority=priority)  # fmt: skip


BURSTS = 3


async def _push(queue: AsyncFairQueue, small: list[str], big_tasks: int, per_small: int) -> None:
    """Big floods the queue first; then each small tenant pushes a little, in a few bursts,
    and two critical tasks of big arrive after the first burst."""
    await queue.push_many([_job(BIG) for _ in range(big_tasks)])
    for burst in range(BURSTS):
        count = per_small // BURSTS + (1 if burst < per_small % BURSTS else 0)
        for tenant in small:
            await queue.push_many([_job(tenant) for _ in range(count)])
        if burst == 0:
            await queue.push_many([_job(BIG, critical=True) for _ in range(2)])
        await asyncio.sleep(5 * summary.work_seconds)  # users push over time


def _table(progress: Progress, tenants: list[str], pushed: dict[str, int]) -> Group:
    done = {tenant: summary.completions.count(tenant) for tenant in tenants}
    for tenant, bar in zip(tenants, progress.task_ids, strict=True):
        progress.update(bar, completed=done[tenant], total=max(pushed[tenant], 1))
    return Group(progress)


async def _run(url: str, tenants: int, tasks: int, console: Console) -> None:
    namespace = f"demo-{uuid.uuid4().hex[:8]}"
    small = [f"small-{n}" for n in range(1, tenants)]
    per_small = max(1, int(tasks * 0.4) // len(small))
    big_tasks = tasks - per_small * len(small)
    pushed = {BIG: big_tasks + 2, **dict.fromkeys(small, per_small)}
    queue = AsyncFairQueue(url, namespace, settings=DEMO_SETTINGS)
    config = WorkerConfig(redis_url=url, namespace=namespace, concurrency=CONCURRENCY,
                          poll_interval_seconds=0.05)  # fmt: skip
    workers = [Worker(config.model_copy(update={"id": f"demo-{n}"}), functions)
               for n in range(WORKERS)]  # fmt: skip
    progress = Progress(TextColumn("{task.description:>9}"), BarColumn(), MofNCompleteColumn(),
                        console=console)  # fmt: skip
    names = [BIG, *small]
    for name in names:
        progress.add_task(name, total=pushed[name])
    runs = [asyncio.create_task(worker.run_async()) for worker in workers]
    try:
        with Live(_table(progress, names, pushed), console=console, refresh_per_second=10) as live:
            pushing = asyncio.create_task(_push(queue, small, big_tasks, per_small))
            while len(summary.completions) < sum(pushed.values()):
                live.update(_table(progress, names, pushed))
                await asyncio.sleep(0.05)  # the display's refresh period
            await pushing
            live.update(_table(progress, names, pushed))
    finally:
        for worker in workers:
            worker.stop()
        await asyncio.gather(*runs)
        await queue.close()


def _report(console: Console) -> None:
    console.print()
    table = Table(title="Completions per tenant")
    for column in ("tenant", "finished", "first", "last", "mean position"):
        table.add_column(column, justify="left" if column == "tenant" else "right")
    for tenant in sorted(set(summary.completions), key=lambda t: (t != BIG, t)):
        spots = summary.positions(tenant)
        mean = f"{summary.mean_position([tenant]):.0f}"
        table.add_row(tenant, str(len(spots)), str(spots[0]), str(spots[-1]), mean)
    console.print(table)
    small = sorted(set(summary.completions) - {BIG})
    last_small = max(i for name in small for i in summary.positions(name))
    total = len(summary.completions)
    console.print(
        f"Small tenants finished by completion {last_small} of {total} "
        f"(mean position {summary.mean_position(small):.0f}; "
        f"{BIG}: {summary.mean_position([BIG]):.0f}). A FIFO queue would finish them last."
    )
    turns = summary.critical_positions
    console.print(f"Critical tasks of {BIG}, pushed after its flood, ran at positions {turns}.")


def run(
    url: str | None, tenants: int, tasks: int, console: Console, work_seconds: float = 0.01
) -> DemoSummary:
    """Runs the demo on ``url`` (or a throwaway embedded Valkey) and prints what happened."""
    summary.completions.clear()
    summary.critical_positions.clear()
    summary.work_seconds = work_seconds
    console.print(f"{WORKERS} workers, {tenants} tenants, {tasks} tasks: {BIG} floods the queue.")
    with _server_url(url) as server_url:
        asyncio.run(_run(server_url, tenants, tasks, console))
    _report(console)
    return summary
