"""The two front doors over the sans-IO core: :class:`FairQueue` and :class:`AsyncFairQueue`."""

from fairque.client.aio import AsyncFairQueue
from fairque.client.sharded import AsyncShardedQueue, ShardedQueue
from fairque.client.sync import FairQueue

__all__ = ["AsyncFairQueue", "AsyncShardedQueue", "FairQueue", "ShardedQueue"]
