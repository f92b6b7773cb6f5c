"""Workers: run registered task functions from the fair queue (see :class:`Worker`).

``@task`` (:mod:`fairque.runners.fair_worker.functions`) registers a function by name; a worker
leases tasks, runs the function a task names, and acknowledges the outcome.
"""

from fairque.runners.fair_worker.config import WorkerConfig, load_config
from fairque.runners.fair_worker.context import TaskContext
from fairque.runners.fair_worker.functions import Pipeline, Registry, TaskFunction, registry, task
from fairque.runners.fair_worker.hooks import WorkerHooks
from fairque.runners.fair_worker.runner import Worker
from fairque.runners.fair_worker.sync_context import SyncTaskContext

__all__ = [
    "Pipeline",
    "Registry",
    "SyncTaskContext",
    "TaskContext",
    "TaskFunction",
    "Worker",
    "WorkerConfig",
    "WorkerHooks",
    "load_config",
    "registry",
    "task",
]
