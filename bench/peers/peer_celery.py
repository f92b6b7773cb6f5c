"""Celery in the benchmark of peers: its job, its worker command, its client calls.

Runs in its own venv (see run.py); the Celery imports are invisible to the project's mypy.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from celery import Celery  # type: ignore[import-not-found]
from peers_job import Workers, record, url

app = Celery("peer_celery", broker=url())  # no result backend: nothing waits for results


@app.task(name="job")  # type: ignore[untyped-decorator]
def job(entry: str) -> None:
    """The no-op job: one Redis call of its own (``peers_job.RECORD``)."""
    record(entry)


class CeleryPeer:
    name = "celery"
    model = "prefork pool: -c N child processes (default N = cores), prefetch x4"
    enqueue_api = "task.delay"
    bulk_api: str | None = None  # group(...).apply_async() publishes one message per job
    fairness = "one queue per tenant, celery worker -Q big,small0,... (BRPOP over all)"

    def __init__(self, url: str) -> None:
        from importlib.metadata import version

        self.version = version("celery")
        self.url = url

    def prepare(self) -> None:
        """Nothing to declare."""

    def enqueue(self, entries: Sequence[str], tenant: str | None = None) -> None:
        if tenant is None:
            for entry in entries:
                job.delay(entry)
        else:
            for entry in entries:
                job.apply_async((entry,), queue=tenant)

    def enqueue_bulk(self, entries: Sequence[str], tenant: str | None = None) -> None:
        raise NotImplementedError

    def workers(self, processes: int, tenants: Sequence[str] | None = None) -> Workers:
        command = [
            str(Path(sys.executable).parent / "celery"),
            "-A",
            "peer_celery",
            "worker",
            "--concurrency",
            str(processes),
        ]
        if tenants:
            command += ["--queues", ",".join(tenants)]
        return Workers([command])

    def close(self) -> None:
        app.close()


def make_peer(url: str) -> CeleryPeer:
    return CeleryPeer(url)
