"""Seed 004: numbered queues behind a ``Storage`` interface, and contract workers.

Two storages: :class:`RedisStorage` / :class:`AsyncRedisStorage` on the fairque engine,
and :class:`MemoryStorage` / :class:`AsyncMemoryStorage` in this process.
"""

from fairque.storage.memory import AsyncMemoryStorage, ManualClock, MemoryStorage
from fairque.storage.models import PutTaskRequest, QueueStat, RetryInfo, Stats, StorageTask
from fairque.storage.protocol import AsyncStorage, Storage
from fairque.storage.redis import AsyncRedisStorage, RedisStorage

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
