"""Seed 004: numbered queues behind a ``Storage`` interface, and contract workers.

Two storages: :class:`RedisStorage` / :class:`AsyncRedisStorage` on the fairque engine,
and :class:`MemoryStorage` / :class:`AsyncMemoryStorage` in this process.
"""

from fairque.storage.client import AsyncRedisStorage, RedisStorage
from fairque.storage.memory import AsyncMemoryStorage, ManualClock, MemoryStorage
from fairque.storage.models import PutTaskRequest, QueueStat, RetryInfo, Stats, StorageTask
from fairque.storage.protocol import AsyncStorage, Storage

__all__ = [
    "AsyncMemoryStorage",
    "AsyncRedisStorage",
    "AsyncStorage",
    "ManualClock",
    "MemoryStorage",
    "PutTaskRequest",
    "QueueStat",
    "RedisStorage",
    "RetryInfo",
    "Stats",
    "Storage",
    "StorageTask",
]
