"""``fairque demo``: one heavy tenant and a few small ones share a queue.

With a FIFO queue the small tenants would wait behind the heavy one; here they finish
early, and critical tasks pushed last still run first within their tenant.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from fairque.client import FairQueue
from fairque.config import URL_ENV, QueueSettings
from fairque.embedded import LocalServer
from fairque.models import Priority, Task

BIG = "big"
DEMO_SETTINGS = QueueSettings(finished_ttl=600)  # a demo leaves little behind


@dataclass(frozen=True)
class DemoSummary:
    """What ran, in order: the tenant of each completion, and where the critical ones ran."""

    completions: list[str]
    critical_positions: list[int] = field(default_factory=list)

    def positions(self, tenant: str) -> list[int]:
        """1-based completion positions of ``tenant``'s tasks."""
        return [i for i, name in enumerate(self.completions, 1) if name == tenant]

    def mean_position(self, tenants: list[str]) -> float:
        """The mean completion position of the tasks of ``tenants``."""
        spots = [i for i, name in enumerate(self.completions, 1) if name in tenants]
        return sum(spots) / len(spots)


@contextlib.contextmanager
def _server_url(url: str | None) -> Iterator[str]:
    """The given server, else a throwaway embedded Valkey (no daemon left behind)."""
    url = url or os.environ.get(URL_ENV)
    if url:
        yield url
        return
    with LocalServer() as server:
        yield server.url


def _push(queue: FairQueue, tenants: int, tasks: int) -> list[str]:
    """Big floods first, then the small tenants, then two critical tasks of big."""
    small = [f"small-{n}" for n in range(1, tenants)]
    per_small = max(1, int(tasks * 0.4) // len(small))
    queue.push_many([Task(user_id=BIG, payload=n) for n in range(tasks - per_small * len(small))])
    for tenant in small:
        queue.push_many([Task(user_id=tenant, payload=n) for n in range(per_small)])
    critical = [Task(user_id=BIG, priority=Priority.CRITICAL, payload="urgent") for _ in range(2)]
    return queue.push_many(critical)


def _drain(queue: FairQueue, critical_ids: list[str]) -> DemoSummary:
    completions: list[str] = []
    critical_positions: list[int] = []
    while leased := queue.pop(count=10, worker_id="demo"):
        queue.finish_many(leased)
        for task in leased:
            completions.append(task.user_id)
            if task.task_id in critical_ids:
                critical_positions.append(len(completions))
    return DemoSummary(completions, critical_positions)


def _report(summary: DemoSummary, console: Console) -> None:
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
    console.print(f"Critical tasks of {BIG}, pushed last, ran at its first turns: {turns}.")


def run(url: str | None, tenants: int, tasks: int, console: Console) -> DemoSummary:
    """Runs the demo on ``url`` (or a throwaway embedded Valkey) and prints what happened."""
    with _server_url(url) as server_url:
        queue = FairQueue(server_url, f"demo-{uuid.uuid4().hex[:8]}", settings=DEMO_SETTINGS)
        try:
            console.print(f"{tenants} tenants, {tasks} tasks: {BIG} pushes most of them first.")
            critical_ids = _push(queue, tenants, tasks)
            summary = _drain(queue, critical_ids)
        finally:
            queue.close()
    _report(summary, console)
    return summary
