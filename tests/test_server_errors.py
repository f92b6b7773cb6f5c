"""Errors of the server reach the user as fairque errors: a client made from a URL has
fairque's timeouts (or the URL's), a server that does not answer in time raises
ServerTimeout and one that cannot be reached ServerUnavailable, both naming the server;
a waiting pop on a cluster may wait longer than the socket timeout."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from fairque import AsyncFairQueue, FairQueue, Task
from fairque.cli.common import explain
from fairque.engine.connect import (
    CONNECT_TIMEOUT,
    SOCKET_TIMEOUT,
    async_client,
    socket_timeout,
    sync_client,
)
from fairque.errors import FairQueueError, ServerTimeout, ServerUnavailable
from fairque.servers.embedded import free_port
from fairque.servers.local_cluster import LocalCluster


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback port that accepts connections and never answers (a stalled server)."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(16)
        yield f"redis://127.0.0.1:{listening.getsockname()[1]}"


def test_a_client_from_a_url_has_fairques_timeouts_unless_the_url_sets_them() -> None:
    for make in (sync_client, async_client):
        plain = make("redis://127.0.0.1:1").connection_pool.connection_kwargs  # type: ignore[union-attr]
        assert plain["socket_timeout"] == SOCKET_TIMEOUT
        assert plain["socket_connect_timeout"] == CONNECT_TIMEOUT
        given = make("redis://127.0.0.1:1?socket_timeout=2.5&socket_connect_timeout=1")
        assert socket_timeout(given) == 2.5
        assert given.connection_pool.connection_kwargs["socket_connect_timeout"] == 1  # type: ignore[union-attr]


def test_a_server_that_does_not_answer_in_time_raises_server_timeout(silent_server: str) -> None:
    with (
        FairQueue(f"{silent_server}?socket_timeout=0.2", "t") as queue,
        pytest.raises(ServerTimeout) as raised,
    ):
        queue.push(Task(user_id="alice"))
    error = raised.value
    assert isinstance(error, FairQueueError)
    assert isinstance(error, RedisTimeoutError)  # code that catches redis-py's still does
    address = silent_server.removeprefix("redis://")
    assert error.address == address
    assert f"the server at {address} did not answer within 0.2 s" in str(error)
    assert "?socket_timeout=SECONDS" in str(error)
    assert explain(error) == " ".join(str(error).split())


async def test_an_async_client_raises_the_same(silent_server: str) -> None:
    queue = AsyncFairQueue(f"{silent_server}?socket_timeout=0.2", "t")
    try:
        with pytest.raises(ServerTimeout, match=r"did not answer within 0\.2 s"):
            await queue.push(Task(user_id="alice"))
    finally:
        await queue.close()
    dead = f"redis://127.0.0.1:{free_port()}"
    queue = AsyncFairQueue(dead, "t")
    try:
        with pytest.raises(ServerUnavailable, match=r"cannot reach the server at 127\.0\.0\.1"):
            await queue.stats()
    finally:
        await queue.close()


def test_a_server_that_cannot_be_reached_raises_server_unavailable() -> None:
    port = free_port()
    with (
        FairQueue(f"redis://127.0.0.1:{port}", "t") as queue,
        pytest.raises(ServerUnavailable) as raised,
    ):
        queue.stats()
    error = raised.value
    assert isinstance(error, FairQueueError)
    assert isinstance(error, RedisConnectionError)
    assert not isinstance(error, ServerTimeout)
    assert str(error).startswith(f"cannot reach the server at 127.0.0.1:{port} (")
    assert "Connection refused" in str(error)
    assert explain(error).endswith("is it running, and is --url (or $FAIRQUE_REDIS_URL) right?")


@pytest.fixture(scope="module")
def quick_timeout_cluster() -> Iterator[LocalCluster]:
    with LocalCluster() as started:
        yield started


@pytest.mark.parametrize("flavour", ["sync", "async"])
async def test_a_waiting_pop_on_a_cluster_may_outlast_the_socket_timeout(
    flavour: str, quick_timeout_cluster: LocalCluster, namespace: str
) -> None:
    url = f"{quick_timeout_cluster.url}?socket_timeout=0.3"
    started = time.monotonic()
    if flavour == "sync":
        with FairQueue(url, namespace) as queue:
            assert queue.pop(wait=1.2) == []
    else:
        aqueue = AsyncFairQueue(url, namespace)
        try:
            assert await aqueue.pop(wait=1.2) == []
        finally:
            await aqueue.close()
    assert time.monotonic() - started >= 1.2  # it waited, rather than failing at 0.3 s
