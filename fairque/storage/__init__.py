"""The storage: numbered queues behind a ``Storage`` interface, and contract workers.

Three storages, one behaviour: :class:`RedisStorage` / :class:`AsyncRedisStorage` on the
fairque engine, :class:`TarantoolStorage` / :class:`AsyncTarantoolStorage` in Tarantool
(Lua stored procedures, WAL on), and :class:`MemoryStorage` / :class:`AsyncMemoryStorage`
in this process. Each also keeps the board through which the Manager steers workers in
other processes (:mod:`fairque.storage.plan`).
"""

from fairque.storage.async_client import AsyncRedisStorage
from fairque.storage.async_protocol import AsyncStorage
from fairque.storage.async_tarantool import AsyncTarantoolStorage
from fairque.storage.blocking_tarantool import TarantoolStorage
from fairque.storage.client import RedisStorage
from fairque.storage.memory import AsyncMemoryStorage, ManualClock, MemoryStorage
from fairque.storage.models import PutTaskRequest, QueueStat, RetryInfo, Stats, StorageTask
from fairque.storage.plan import QueueReport, WorkerReport
from fairque.storage.protocol import Storage
from fairque.storage.tarantool import StoreFull, TarantoolUnreachable

__all__ = [
    "AsyncMemoryStorage",
    "AsyncRedisStorage",
    "AsyncStorage",
    "AsyncTarantoolStorage",
    "ManualClock",
    "MemoryStorage",
    "PutTaskRequest",
    "QueueReport",
    "QueueStat",
    "RedisStorage",
    "RetryInfo",
    "Stats",
    "Storage",
    "StorageTask",
    "StoreFull",
    "TarantoolStorage",
    "TarantoolUnreachable",
    "WorkerReport",
]
