"""What a long-running loop (worker, scheduler) does while the server is unreachable."""

from __future__ import annotations

from dataclasses import dataclass

from redis.exceptions import ClusterError, RedisClusterException, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

# The server is unreachable, or a cluster is failing over (its slots are being moved).
OUTAGE = (
    RedisConnectionError, RedisTimeoutError, OSError,
    ClusterError, TryAgainError, RedisClusterException,
)  # fmt: skip


@dataclass
class Backoff:
    """Exponential waits while the server is unreachable: 0.1 s doubling up to 5 s."""

    first: float = 0.1
    limit: float = 5.0
    current: float = 0.0

    def next(self) -> float:
        self.current = min(self.limit, max(self.first, self.current * 2))
        return self.current

    def reset(self) -> None:
        self.current = 0.0
