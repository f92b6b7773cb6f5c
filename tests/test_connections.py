"""The dispatcher's HTTP/1.1 client (fairque.http.connections) against real servers: small
asyncio servers that answer the way a worker written with any framework could."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from fairque.http.connections import Broken, Connections, Unreachable

Answer = Callable[[bytes], bytes]  # the request's body -> the raw HTTP answer


@asynccontextmanager
async def raw_server(answer: Answer, close_after: bool = False) -> AsyncIterator[list[str]]:
    """Serves ``answer`` on a loopback port. Yields a list: its URL, then one entry per
    connection it accepted (the client's port)."""
    accepted: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(str(writer.get_extra_info("peername")[1]))
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                body = await reader.readexactly(length)
                writer.write(answer(head + body))
                await writer.drain()
                if close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    accepted.insert(0, f"http://127.0.0.1:{port}")
    async with server:
        yield accepted


def echo(status: int = 200, extra: str = "") -> Answer:
    def answer(request: bytes) -> bytes:
        body = request.split(b"\r\n\r\n", 1)[1]
        head = f"HTTP/1.1 {status} X\r\n{extra}content-length: {len(body)}\r\n\r\n"
        return head.encode() + body

    return answer


async def test_a_connection_is_kept_for_the_next_request() -> None:
    http = Connections({"accept": "application/msgpack"})
    async with raw_server(echo()) as accepted:
        url = accepted[0]
        for n in range(3):
            assert await http.post(url, b"job %d" % n) == (200, b"job %d" % n)
        assert len(accepted) == 2  # the URL, then one connection
    await http.aclose()


async def test_the_request_goes_to_run_under_the_url_with_its_headers() -> None:
    http = Connections({"authorization": "Bearer t", "content-type": "application/msgpack"})

    def head_back(request: bytes) -> bytes:
        head = request.split(b"\r\n\r\n", 1)[0]
        return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(head), head)

    async with raw_server(head_back) as accepted:
        status, head = await http.post(accepted[0] + "/base/", b"{}")
    await http.aclose()
    lines = head.decode().split("\r\n")
    assert status == 200
    assert lines[0] == "POST /base/run HTTP/1.1"
    assert "authorization: Bearer t" in lines
    assert "content-length: 2" in lines


async def test_chunked_answers_and_interim_answers_are_read() -> None:
    def chunked(_request: bytes) -> bytes:
        return (
            b"HTTP/1.1 100 Continue\r\n\r\n"
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            b"3;x=y\r\nabc\r\n2\r\nde\r\n0\r\ntrailer: 1\r\n\r\n"
        )

    http = Connections({})
    async with raw_server(chunked) as accepted:
        assert await http.post(accepted[0], b"") == (200, b"abcde")
        assert await http.post(accepted[0], b"") == (200, b"abcde")
        assert len(accepted) == 2  # read to its end, the connection was kept
    await http.aclose()


async def test_an_answer_without_length_ends_with_its_connection() -> None:
    http = Connections({})
    answer = b"HTTP/1.0 500 Oops\r\n\r\nno length"
    async with raw_server(lambda _r: answer, close_after=True) as accepted:
        assert await http.post(accepted[0], b"") == (500, b"no length")
        assert await http.post(accepted[0], b"") == (500, b"no length")
        assert len(accepted) == 3  # not kept: a new connection each time
    await http.aclose()


async def test_connection_close_is_honoured() -> None:
    http = Connections({})
    async with raw_server(echo(extra="connection: close\r\n"), close_after=True) as accepted:
        for _ in range(2):
            assert await http.post(accepted[0], b"x") == (200, b"x")
        assert len(accepted) == 3
    await http.aclose()


@pytest.mark.parametrize(
    "answer",
    [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"],
)
async def test_a_broken_answer_is_broken(answer: bytes) -> None:
    http = Connections({})
    async with raw_server(lambda _r: answer, close_after=True) as accepted:
        with pytest.raises(Broken):
            await http.post(accepted[0], b"")
    await http.aclose()


async def test_a_cancelled_request_does_not_leave_its_connection_for_the_next() -> None:
    http = Connections({})
    async with raw_server(echo()) as accepted:
        url = accepted[0]
        await http.post(url, b"first")
        # Cancelled before its answer was read: its connection must not carry another
        # request (the next read would be this request's answer).
        task = asyncio.create_task(http.post(url, b"cancelled"))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await http.post(url, b"second") == (200, b"second")
    await http.aclose()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:1",  # nobody listens
        "http://\u0117Y\u00eb\u00cd\U000ec566\x9f\u00f2\U00058804\u023a",  # IDNA refuses it
        "ftp://127.0.0.1:21",
        "http://127.0.0.1:99999",
    ],
)
async def test_an_unreachable_url_is_unreachable(url: str) -> None:
    http = Connections({})
    with pytest.raises(Unreachable):
        await http.post(url, b"")
    await http.aclose()


async def test_an_answer_is_read_as_it_arrives_and_kept_only_when_read_to_its_end() -> None:
    more = asyncio.Event()
    accepted: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer.get_extra_info("peername")[1])
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            assert head.startswith(b"POST /base/runs ")
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\none\r\n")
            await more.wait()  # the first piece is read before the rest exists
            writer.write(b"3\r\ntwo\r\n0\r\n\r\n")
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/base/"
    http = Connections({})
    async with server:
        async with http.request(url, b"", "runs") as answer:
            pieces = answer.pieces()
            assert (answer.status, await anext(pieces)) == (200, b"one")
            more.set()
            assert [piece async for piece in pieces] == [b"two"]
        assert answer.ended
        async with http.request(url, b"", "runs") as answer:  # on the kept connection
            assert await anext(answer.pieces()) == b"one"
        assert not answer.ended  # left unread: its connection is closed, not kept
        assert await http.post(url, b"", "runs") == (200, b"onetwo")
        assert len(accepted) == 2
    await http.aclose()
