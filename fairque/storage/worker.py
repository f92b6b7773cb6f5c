"""The public path of the storage's contract workers and Manager, which live with the other
runners (:mod:`fairque.runners.storage_worker`, :mod:`fairque.runners.manager`)."""

from fairque.runners.manager import Manager
from fairque.runners.storage_worker import (
    Handler,
    HandlerStats,
    QueueConfig,
    StorageWorker,
    StorageWorkerConfig,
)

__all__ = [
    "Handler",
    "HandlerStats",
    "Manager",
    "QueueConfig",
    "StorageWorker",
    "StorageWorkerConfig",
]
