"""Listening on a namespace's sharded pub/sub channels: what a caller waits on instead of
polling (``queue.result`` waits on ``ended``, which the scripts publish to when tasks end;
a worker on ``wake`` and ``abort``).

Sharded pub/sub (``SSUBSCRIBE``): on a cluster a channel lives on the node of its slot
(the namespace's) and a message never crosses the cluster bus. A subscription is made on
the plain client of the node that serves the channel, as the executor's route says, so
it is the same on one server and on a cluster; channels of several nodes (the shards of
a sharded queue) get a subscription each. A subscription whose node is lost raises the
connection's error, after telling the executor, whose route then asks the cluster where
the channel went: the caller opens a new listener, on the new node.

A subscription is confirmed before :meth:`Listener.open` returns, so a caller that reads
the state after opening cannot miss a message published meanwhile. Pub/sub is at most
once (a dropped connection loses what was sent meanwhile), so a waiter also re-reads the
state now and then; see ``RECHECK_SECONDS``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from fairque.closing import AsyncCloseable, Closeable
from fairque.engine.calls import decode
from fairque.engine.outage import SERVER_AWAY, connection_errors
from fairque.engine.waiting import wait_event, within

if TYPE_CHECKING:
    from redis.asyncio.client import PubSub as AsyncPubSub
    from redis.client import PubSub

    from fairque.engine.async_executor import AsyncExecutor
    from fairque.engine.executor import Executor

RECHECK_SECONDS = 5.0  # a waiter re-reads the state at least this often (lost messages)
_CONFIRM_SECONDS = 10.0  # how long a subscription may take to be confirmed
_READ_SECONDS = 1.0  # one read of a subscription's connection, at most


def _data(message: Any) -> list[str]:
    """The ids a message on an ``ended`` or ``abort`` channel carries (a MessagePack
    array)."""
    if not message or message.get("type") not in ("smessage", b"smessage"):
        return []
    ids = decode(message["data"])
    return [str(item) for item in ids] if isinstance(ids, list) else []


def _confirms(message: Any) -> bool:
    return bool(message) and message.get("type") in ("ssubscribe", b"ssubscribe")


class Listener(Closeable):
    """A blocking subscription to one sharded channel (a context manager)."""

    def __init__(self, executor: Executor, channel: str) -> None:
        self.executor = executor
        self.channel = channel
        self._pubsub: PubSub | None = None

    def open(self) -> Listener:
        """Subscribes and waits for the server to confirm it."""
        self._pubsub = self.executor.client_for(self.channel).pubsub()  # type: ignore[no-untyped-call]
        self._told(self._pubsub.ssubscribe, self.channel)
        deadline = time.monotonic() + _CONFIRM_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            if _confirms(self._read(min(left, _READ_SECONDS))):
                return self
        raise TimeoutError(f"SSUBSCRIBE {self.channel} was not confirmed")

    def _read(self, timeout: float) -> Any:
        assert self._pubsub is not None
        return self._told(self._pubsub.get_message, timeout=timeout)

    def _told(self, command: Any, *args: Any, **options: Any) -> Any:
        """``command``'s result; an outage is told to the executor's route first."""
        try:
            return command(*args, **options)
        except SERVER_AWAY:
            self.executor.lost(self.channel)
            raise

    def wait_for(self, wanted: str, timeout: float) -> bool:
        """Waits up to ``timeout`` seconds for a message naming ``wanted``; True if one came."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if wanted in _data(self._read(left)):
                return True
        return False

    def close(self) -> None:
        """Ends the subscription and its connection."""
        if self._pubsub is not None:
            self._pubsub.close()


class AsyncListener(AsyncCloseable):
    """:class:`Listener` for asyncio clients, on one channel or several (a worker listens
    on the ``abort`` and ``wake`` channels of every shard): a subscription per node,
    each read by a task of its own into one queue of messages."""

    def __init__(self, executor: AsyncExecutor, *channels: str) -> None:
        self.executor = executor
        self.channels = channels
        self._subscriptions: list[AsyncPubSub] = []
        self._readers: list[asyncio.Task[None]] = []
        self._messages: deque[Any] = deque()  # messages and errors, as the readers met them
        self._arrived = asyncio.Event()  # set when one is added
        self._subscribed = False  # every channel's subscription confirmed, by open()

    async def open(self) -> AsyncListener:
        """Subscribes and waits for the server to confirm it."""
        try:
            by_node: dict[int, tuple[Any, list[str]]] = {}
            for channel in self.channels:
                client = await self.executor.client_for(channel)
                by_node.setdefault(id(client), (client, []))[1].append(channel)
            for client, channels in by_node.values():
                pubsub = client.pubsub()
                self._subscriptions.append(pubsub)
                with connection_errors():
                    for channel in channels:  # one a command: they may be of several slots
                        await self._told(channel, pubsub.ssubscribe(channel))
                    await within(self._confirmed(pubsub, channels), _CONFIRM_SECONDS)
                self._readers.append(asyncio.create_task(self._read_into_queue(pubsub, channels)))
        except BaseException:  # `async with` closes only what opened
            await self.close()
            raise
        self._subscribed = True
        return self

    @property
    def failed(self) -> bool:
        """True once a subscription failed (its error is, or was, raised by a read), and
        while an opening that failed left none (a reopen during an outage): a caller
        reopens until every channel has one again, or it would wait for wake-ups that no
        subscription can bring."""
        return not self._subscribed or any(reader.done() for reader in self._readers)

    async def reopen(self) -> None:
        """Subscribes again, where the executor's route says now (after a failure)."""
        await self.close()
        self._subscribed = False
        self._subscriptions, self._readers = [], []
        self._messages.clear()
        await self.open()

    async def _told(self, channel: str, command: Any) -> Any:
        """``command``'s result; an outage is told to the executor's route first."""
        try:
            return await command
        except SERVER_AWAY:
            await self.executor.lost(channel)
            raise

    async def _confirmed(self, pubsub: AsyncPubSub, channels: list[str]) -> None:
        wanted = len(channels)
        while wanted > 0:
            if _confirms(await pubsub.get_message(timeout=_READ_SECONDS)):
                wanted -= 1

    async def _read_into_queue(self, pubsub: AsyncPubSub, channels: list[str]) -> None:
        """Reads one subscription's messages into the queue; its error ends it, queued
        for the next read to raise."""
        try:
            while True:
                with connection_errors():
                    message = await self._told(
                        channels[0], pubsub.get_message(timeout=_READ_SECONDS)
                    )
                if message is not None:
                    self._add(message)
        except Exception as exc:
            self._add(exc)

    def _add(self, item: Any) -> None:
        self._messages.append(item)
        self._arrived.set()

    async def next_message(self, timeout: float) -> Any:
        """The next message, or None if none came within ``timeout`` seconds; raises the
        error of a subscription that failed."""
        if not self._messages:
            self._arrived.clear()
            if not await wait_event(self._arrived, timeout):
                return None
        message = self._messages.popleft()
        if isinstance(message, Exception):
            raise message
        return message

    async def next_ids(self, timeout: float) -> list[str]:
        """The ids the next message carries; none if nothing came within ``timeout``."""
        return _data(await self.next_message(timeout))

    async def wait_for(self, wanted: str, timeout: float) -> bool:
        """Waits up to ``timeout`` seconds for a message naming ``wanted``; True if one came."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if wanted in await self.next_ids(left):
                return True
        return False

    async def close(self) -> None:
        """Ends the subscriptions and their connections."""
        for reader in self._readers:
            reader.cancel()
        await asyncio.gather(*self._readers, return_exceptions=True)
        for pubsub in self._subscriptions:
            with contextlib.suppress(*SERVER_AWAY, OSError):
                await pubsub.aclose()  # type: ignore[no-untyped-call]
