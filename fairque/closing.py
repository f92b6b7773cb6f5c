"""``with`` and ``async with`` for everything that holds a connection, a process or a
folder: :class:`Closeable` and :class:`AsyncCloseable` (one base, so that no class
writes its own ``__enter__`` / ``__exit__``)."""

from __future__ import annotations

from typing import TypeVar

S = TypeVar("S", bound="Closeable")
A = TypeVar("A", bound="AsyncCloseable")


class Closeable:
    """``with thing:`` opens it (:meth:`open`: nothing more by default) and closes it on
    the way out, whatever happened inside."""

    def open(self: S) -> S:
        """Makes ready what ``with`` uses (a server started, a subscription made)."""
        return self

    def close(self) -> None:
        """Lets go of what this holds."""
        raise NotImplementedError

    def __enter__(self: S) -> S:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncCloseable:
    """:class:`Closeable` for asyncio: ``async with``."""

    async def open(self: A) -> A:
        """Makes ready what ``async with`` uses."""
        return self

    async def close(self) -> None:
        """Lets go of what this holds."""
        raise NotImplementedError

    async def __aenter__(self: A) -> A:
        return await self.open()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
