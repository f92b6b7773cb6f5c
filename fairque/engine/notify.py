"""Listening on a namespace's sharded pub/sub channel: what a caller waits on instead of
polling (``queue.result`` waits on ``ended``, which the scripts publish to when tasks end).

Sharded pub/sub (``SSUBSCRIBE``), as for the workers' ``wake`` channel: on a cluster the
subscription lives on the node of the namespace's slot and the message never crosses
the cluster bus. A subscription is confirmed before :meth:`Listener.open` returns, so a
caller that reads the state after opening cannot miss a message published meanwhile.
Pub/sub is at most once (a dropped connection loses what was sent meanwhile), so a
waiter also re-reads the state now and then; see ``RECHECK_SECONDS``.
"""

from __future__ import annotations

import time
from typing import Any

from redis.asyncio.cluster import ClusterPubSub as AsyncClusterPubSub
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import ClusterPubSub

from fairque.closing import AsyncCloseable, Closeable
from fairque.engine.calls import decode
from fairque.engine.connect import AsyncClient, SyncClient
from fairque.engine.outage import connection_errors
from fairque.engine.waiting import within

RECHECK_SECONDS = 5.0  # a waiter re-reads the state at least this often (lost messages)
_CONFIRM_SECONDS = 10.0  # how long a subscription may take to be confirmed


def _data(message: Any) -> list[str]:
    """The ids a message on an ``ended`` or ``abort`` channel carries (a MessagePack
    array)."""
    if not message or message.get("type") not in ("smessage", b"smessage"):
        return []
    ids = decode(message["data"])
    return [str(item) for item in ids] if isinstance(ids, list) else []


class Listener(Closeable):
    """A blocking subscription to one sharded channel (a context manager)."""

    def __init__(self, client: SyncClient, channel: str) -> None:
        self.channel = channel
        self._pubsub = client.pubsub()  # type: ignore[no-untyped-call]
        self._cluster = isinstance(self._pubsub, ClusterPubSub)

    def open(self) -> Listener:
        """Subscribes and waits for the server to confirm it."""
        self._pubsub.ssubscribe(self.channel)
        deadline = time.monotonic() + _CONFIRM_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            message = self._read(min(left, 1.0))
            if message and message.get("type") in ("ssubscribe", b"ssubscribe"):
                return self
        raise TimeoutError(f"SSUBSCRIBE {self.channel} was not confirmed")

    def _read(self, timeout: float) -> Any:
        if self._cluster:
            return self._pubsub.get_sharded_message(timeout=timeout)
        return self._pubsub.get_message(timeout=timeout)

    def wait_for(self, wanted: str, timeout: float) -> bool:
        """Waits up to ``timeout`` seconds for a message naming ``wanted``; True if one came."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if wanted in _data(self._read(left)):
                return True
        return False

    def close(self) -> None:
        """Ends the subscription and its connection."""
        self._pubsub.close()


class AsyncListener(AsyncCloseable):
    """:class:`Listener` for asyncio clients, on one channel or several (a worker listens
    on the ``abort`` channel of every shard)."""

    def __init__(self, client: AsyncClient, *channels: str) -> None:
        self.channels = channels
        self._client = client
        self._pubsub: Any = None

    async def open(self) -> AsyncListener:
        """Subscribes and waits for the server to confirm it."""
        if isinstance(self._client, AsyncRedisCluster):
            await self._client.initialize()  # the channels' nodes must be known now
        self._pubsub = self._client.pubsub()
        try:
            for channel in self.channels:
                await self._pubsub.ssubscribe(channel)
            await within(self._confirmed(len(self.channels)), _CONFIRM_SECONDS)
        except BaseException:  # `async with` closes only what opened
            await self.close()
            raise
        return self

    async def _confirmed(self, wanted: int) -> None:
        while wanted > 0:
            message = await self._read(1.0)
            if message and message.get("type") in ("ssubscribe", b"ssubscribe"):
                wanted -= 1

    async def _read(self, timeout: float) -> Any:
        with connection_errors():
            if isinstance(self._pubsub, AsyncClusterPubSub):
                return await self._pubsub.get_sharded_message(timeout=timeout)
            return await self._pubsub.get_message(timeout=timeout)

    async def next_ids(self, timeout: float) -> list[str]:
        """The ids the next message carries; none if nothing came within ``timeout``."""
        return _data(await self._read(timeout))

    async def wait_for(self, wanted: str, timeout: float) -> bool:
        """Waits up to ``timeout`` seconds for a message naming ``wanted``; True if one came."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if wanted in await self.next_ids(left):
                return True
        return False

    async def close(self) -> None:
        """Ends the subscription and its connection."""
        if self._pubsub is not None:
            await self._pubsub.aclose()
