"""The ``Storage`` interface: numbered queues of byte payloads with a visibility timeout.

The asyncio interface, in :mod:`fairque.storage.async_protocol`, is written by hand; the
blocking one, in :mod:`fairque.storage.protocol`, is generated from it
(``tools/unasync.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from fairque.storage.models import PutTaskRequest, RetryInfo, Stats, StorageTask
from fairque.storage.plan import WorkerReport


class AsyncStorage(Protocol):
    """Numbered queues of byte payloads with a visibility timeout."""

    async def get_task(
        self, queue_num: int, count: int, visibility_timeout: float | None = None
    ) -> list[StorageTask]:
        """Takes up to ``count`` ready tasks of ``queue_num`` atomically, oldest start time
        first; nobody else gets them for ``visibility_timeout`` seconds (default 60)."""
        ...

    async def done_task(self, task_ids: Sequence[int]) -> int:
        """Removes the tasks; returns how many there were."""
        ...

    async def retry_task(self, retries: Sequence[RetryInfo]) -> int:
        """Puts taken tasks back (attempts + 1) for their next start time; returns how many
        were taken."""
        ...

    async def put_task(self, request: PutTaskRequest) -> int:
        """Adds a task; returns its id."""
        ...

    async def put_tasks(self, requests: Sequence[PutTaskRequest]) -> list[int]:
        """Adds tasks, all or none; returns their ids in order."""
        ...

    async def get_stat(self) -> Stats:
        """Total, ready, taken and delayed tasks of every queue holding tasks."""
        ...

    # The Manager's board (fairque/storage/plan.py): workers and the plan they follow.

    async def beat(self, report: WorkerReport, ttl: float) -> list[int] | None:
        """Registers the worker for ``ttl`` seconds (server clock); returns its plan, the
        queue of each processor, or None when the Manager gave it none."""
        ...

    async def workers(self) -> list[WorkerReport]:
        """The reports of the workers whose beat has not expired, by worker id."""
        ...

    async def publish_plan(self, plan: Mapping[str, Sequence[int]]) -> int:
        """Replaces the plan (worker id: queue per processor); workers that are not alive
        are left out. Returns how many workers got a plan."""
        ...

    async def read_plan(self) -> dict[str, list[int]]:
        """The plan of the live workers."""
        ...
