"""The dispatcher's HTTP/1.1 client: POSTs to workers over kept-alive connections.

It does what the dispatcher needs and nothing else: one POST with a body, the status and
the body of the answer (``Content-Length``, chunked, or up to the end of the connection),
whole or as it arrives, ``http`` and ``https``. httpx did this at ~1.5 ms of CPU per
request, and its connection pool looks at every connection for every request: with 64
jobs in flight the master spent more time choosing connections than doing anything
else.

A connection is used for one request at a time and kept for the next only once its
answer has been read in full; a request that is cancelled (the job's timeout) or fails
closes it. Environment proxies are not used: workers are reached directly.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

IDLE = 4.0  # seconds a kept connection may wait: below the usual servers' 5 s keep-alive
MAX_HEAD = 64 * 1024  # bytes of status line and headers an answer may have
READ_SIZE = 64 * 1024  # bytes read at once from a body


class Unreachable(Exception):  # noqa: N818 - reads as "except Unreachable"
    """No connection could be made: nothing was sent."""


class Broken(Exception):  # noqa: N818
    """The connection failed or the answer was not HTTP after the request was sent."""


@dataclass(frozen=True)
class Target:
    """Where a URL's requests go."""

    origin: tuple[str, str, int]  # scheme, host, port: the connections it may share
    host_header: str
    path: str  # the URL's path, without its last slash: endpoints go under it


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0

    def usable(self, now: float) -> bool:
        return (
            now - self.idle_since < IDLE
            and not self.writer.is_closing()
            and not self.reader.at_eof()
        )

    def close(self) -> None:
        self.writer.close()


class Connections:
    """Kept-alive connections per origin, and the POST that uses them."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        self._headers = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._targets: dict[str, Target] = {}
        self._tls: ssl.SSLContext | None = None

    async def post(
        self, url: str, body: bytes, endpoint: str = "run", headers: Mapping[str, str] = {}
    ) -> tuple[int, bytes]:
        """POSTs ``body`` to ``endpoint`` under ``url``: the answer's status and body.
        Raises :class:`Unreachable` if no connection could be made, :class:`Broken` if
        the exchange failed after that."""
        async with self.request(url, body, endpoint, headers) as answer:
            return answer.status, await answer.read()

    @asynccontextmanager
    async def request(
        self, url: str, body: bytes, endpoint: str, headers: Mapping[str, str] = {}
    ) -> AsyncIterator[Answer]:
        """POSTs ``body`` to ``endpoint`` under ``url``, with ``headers`` besides those
        of every request, and yields the answer once its head has arrived, for its body
        to be read as it comes. The connection is kept for another request only if the
        body was read to its end."""
        target = self._target(url)
        connection = await self._connection(target.origin)
        more = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        request = (
            f"POST {target.path}/{endpoint} HTTP/1.1\r\nhost: {target.host_header}\r\n"
            f"{self._headers}{more}content-length: {len(body)}\r\n\r\n"
        ).encode("latin-1") + body
        answer: Answer | None = None
        try:
            with broken():
                connection.writer.write(request)
                answer = await _read_head(connection.reader)
            yield answer
        finally:
            if answer is not None and answer.ended and answer.keep:
                connection.idle_since = time.monotonic()
                self._idle.setdefault(target.origin, []).append(connection)
            else:
                connection.close()

    async def aclose(self) -> None:
        """Closes the kept connections."""
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()

    def _target(self, url: str) -> Target:
        target = self._targets.get(url)
        if target is None:
            try:
                parts = urlsplit(url)
                port = parts.port or (443 if parts.scheme == "https" else 80)
                host = parts.hostname or ""
            except ValueError as exc:
                raise Unreachable(f"bad URL: {exc}") from None
            if parts.scheme not in ("http", "https") or not host:
                raise Unreachable(f"not an http(s) URL: {url!r}")
            path = parts.path.rstrip("/")
            try:
                host_header = parts.netloc.rpartition("@")[2].encode("idna").decode()
            except UnicodeError as exc:  # a host name IDNA refuses cannot be reached
                raise Unreachable(f"host name: {exc}") from None
            target = Target((parts.scheme, host, port), host_header, path)
            if len(self._targets) > 10_000:  # worker URLs come and go
                self._targets.clear()
            self._targets[url] = target
        return target

    async def _connection(self, origin: tuple[str, str, int]) -> _Connection:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.usable(now):
                return connection
            connection.close()
        scheme, host, port = origin
        tls = self._tls_context() if scheme == "https" else None
        try:
            reader, writer = await asyncio.open_connection(host, port, ssl=tls, limit=MAX_HEAD)
        except (OSError, UnicodeError, ValueError) as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}") from None
        return _Connection(reader, writer)

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls


@contextmanager
def broken() -> Iterator[None]:
    """Turns what a failed exchange raises into :class:`Broken`."""
    try:
        yield
    except (OSError, EOFError, ValueError, asyncio.LimitOverrunError) as exc:
        raise Broken(f"{type(exc).__name__}: {exc}") from None


class Answer:
    """An answer whose head has been read: its status, then its body, whole
    (:meth:`read`) or as it arrives (:meth:`pieces`)."""

    def __init__(
        self, status: int, reader: asyncio.StreamReader, keep: bool, length: int | None,
        chunked: bool, *, media_type: str = "",
    ) -> None:  # fmt: skip
        self.status = status
        self.media_type = media_type  # its Content-Type, lowercased, without parameters
        self.keep = keep  # the connection may carry another request once this is read
        self.ended = False  # the body was read to its end
        self._reader = reader
        self._length = length  # None: chunked, or up to the end of the connection
        self._chunked = chunked

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([piece async for piece in self.pieces()])

    async def pieces(self) -> AsyncIterator[bytes]:
        """The body in pieces as they arrive; raises :class:`Broken` if it is cut short."""
        with broken():
            if self._chunked:
                async for piece in _chunks(self._reader):
                    yield piece
            elif self._length is not None:
                left = self._length
                while left:
                    piece = await self._reader.read(min(left, READ_SIZE))
                    if not piece:
                        raise EOFError(f"{left} bytes of the answer's body missing")
                    left -= len(piece)
                    yield piece
            else:
                self.keep = False  # it ends with its connection
                while piece := await self._reader.read(READ_SIZE):
                    yield piece
        self.ended = True


async def _read_head(reader: asyncio.StreamReader) -> Answer:
    """The answer's status line and headers (after any interim 1xx answers)."""
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        if not version.startswith("HTTP/1."):
            raise ValueError(f"not an HTTP/1 answer: {lines[0][:80]!r}")
        status = int(rest[:3])
        if status >= 200 or status == 101:  # 1xx: an interim answer, the real one follows
            break
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name:
            headers[name.strip().lower()] = value.strip()
    keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    length = headers.get("content-length")
    media_type = headers.get("content-type", "").partition(";")[0].strip().lower()
    if chunked or length is not None:
        size = None if chunked else int(length or 0)
        return Answer(status, reader, keep, size, chunked, media_type=media_type)
    if status in (204, 304):
        return Answer(status, reader, keep, 0, chunked=False, media_type=media_type)
    # Up to the end of the connection.
    return Answer(status, reader, keep, None, chunked=False, media_type=media_type)


async def _chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                pass
            return
        yield await reader.readexactly(size)
        await reader.readexactly(2)
