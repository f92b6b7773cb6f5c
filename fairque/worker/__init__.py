"""Workers: run registered task functions from the queue (see :class:`Worker`)."""

from fairque.worker.config import WorkerConfig, load_config
from fairque.worker.context import SyncTaskContext, TaskContext
from fairque.worker.runner import Worker

__all__ = ["SyncTaskContext", "TaskContext", "Worker", "WorkerConfig", "load_config"]
