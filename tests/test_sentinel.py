"""Redis Sentinel: the ``redis+sentinel://`` URL, clients of the primary the sentinels
name, errors that say which service and sentinels were asked, and a failover under load.

Each module-scoped set-up (a primary, a replica, three sentinels) serves the tests that
leave it as it is; the tests that kill a primary start their own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.asyncio.sentinel import SentinelManagedConnection, SentinelManagedSSLConnection
from redis.connection import ConnectionPool, SSLConnection
from redis.sentinel import Sentinel, SentinelConnectionPool
from typer.testing import CliRunner

from fairque import AsyncFairQueue, DuplicateTask, FairQueue, InvalidInput, Task
from fairque.cli import app
from fairque.engine.connect import (
    CONNECT_TIMEOUT,
    MAX_CONNECTIONS,
    SOCKET_TIMEOUT,
    HiredisPacking,
    async_client,
    check_url,
    server_address,
    sync_client,
)
from fairque.engine.outage import server_label
from fairque.engine.sentinel import (
    SENTINEL_PORT,
    SENTINEL_TIMEOUT,
    AsyncSentinelClient,
    SentinelClient,
    parse_sentinel_url,
)
from fairque.errors import ServerUnavailable
from fairque.runners.fair_worker.config import load_config
from fairque.servers.embedded import free_port
from fairque.servers.local_sentinel import LocalSentinel
from fairque.storage.connect import is_tarantool
from tests.conftest import ENGINES, REDIS, until, wait_for
from tests.drill import Drill

runner = CliRunner()
PASSWORD = "s3cret-Pass"  # must never appear in an error


def binary_of(engine: str) -> str | None:
    return None if engine == "valkey" else REDIS


@pytest.fixture(scope="module", params=ENGINES)
def sentinel(request: pytest.FixtureRequest) -> Iterator[LocalSentinel]:
    """A set-up per engine for this module's tests that leave it as it is."""
    with LocalSentinel(binary_of(request.param)) as started:
        yield started


# The URL


def pool_of(url: str) -> SentinelConnectionPool:
    """The connection pool of a blocking client of ``url`` (no connection is made)."""
    client = sync_client(url)
    assert isinstance(client, SentinelClient)
    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    return pool


def sentinel_pools(pool: SentinelConnectionPool) -> list[ConnectionPool]:
    """The pools of the connections to each sentinel, in the URL's order."""
    return [sentinel.connection_pool for sentinel in pool.sentinel_manager.sentinels]


def test_a_url_names_sentinels_a_service_and_a_db() -> None:
    url = "redis+sentinel://s1,s2:26380,10.0.0.3:26381/mymaster/2"
    parsed = parse_sentinel_url(url)
    assert parsed.service == "mymaster"
    assert parsed.sentinels == [("s1", SENTINEL_PORT), ("s2", 26380), ("10.0.0.3", 26381)]
    assert not parsed.tls
    pool = pool_of(url)
    assert pool.service_name == "mymaster"
    assert pool.connection_kwargs["db"] == 2
    assert [p.connection_kwargs["port"] for p in sentinel_pools(pool)] == [
        SENTINEL_PORT, 26380, 26381]  # fmt: skip


def test_the_servers_credentials_and_the_sentinels_are_apart() -> None:
    pool = pool_of(
        f"redis+sentinel://app:{PASSWORD}@s1/mymaster"
        "?sentinel_username=watcher&sentinel_password=other%40pass&socket_timeout=5"
    )
    server = pool.connection_kwargs
    assert (server["username"], server["password"]) == ("app", PASSWORD)
    assert server["socket_timeout"] == 5  # the URL's option wins
    assert server["socket_connect_timeout"] == CONNECT_TIMEOUT  # fairque's default
    [asked] = [p.connection_kwargs for p in sentinel_pools(pool)]
    assert (asked["username"], asked["password"]) == ("watcher", "other@pass")
    assert asked["socket_timeout"] == asked["socket_connect_timeout"] == SENTINEL_TIMEOUT


def test_fairques_timeouts_unless_the_url_gives_them() -> None:
    pool = pool_of("redis+sentinel://s1/mymaster?sentinel_socket_timeout=0.5")
    server = pool.connection_kwargs
    assert (server["socket_timeout"], server["socket_connect_timeout"]) == (
        SOCKET_TIMEOUT, CONNECT_TIMEOUT)  # fmt: skip
    [asked] = [p.connection_kwargs for p in sentinel_pools(pool)]
    assert (asked["socket_timeout"], asked["socket_connect_timeout"]) == (0.5, SENTINEL_TIMEOUT)


def test_tls_reaches_the_servers_and_the_sentinels() -> None:
    pool = pool_of("rediss+sentinel://s1/mymaster?ssl_cert_reqs=none")
    assert issubclass(pool.connection_class, SSLConnection)
    assert pool.connection_kwargs["ssl_cert_reqs"] == "none"
    [asked] = sentinel_pools(pool)
    assert issubclass(asked.connection_class, SSLConnection)
    assert asked.connection_kwargs["ssl_cert_reqs"] == "none"
    [plain] = sentinel_pools(pool_of("redis+sentinel://s1/mymaster"))
    assert not issubclass(plain.connection_class, SSLConnection)


def test_ipv6_sentinels_in_brackets() -> None:
    parsed = parse_sentinel_url("redis+sentinel://[::1]:26380,[fe80::2],h3/svc")
    assert parsed.sentinels == [("::1", 26380), ("fe80::2", SENTINEL_PORT), ("h3", SENTINEL_PORT)]
    assert parsed.server_url == "redis://[::1]:26380"


async def test_the_asyncio_client_has_a_bounded_pool_that_packs_with_hiredis() -> None:
    for scheme, picked in [("redis", SentinelManagedConnection),
                           ("rediss", SentinelManagedSSLConnection)]:  # fmt: skip
        client = async_client(f"{scheme}+sentinel://s1/mymaster")
        assert isinstance(client, AsyncSentinelClient)
        pool = client.connection_pool
        assert isinstance(pool, aioredis.BlockingConnectionPool)
        assert pool.max_connections == MAX_CONNECTIONS
        assert issubclass(pool.connection_class, HiredisPacking)
        assert issubclass(pool.connection_class, picked)
        await client.aclose()


@pytest.mark.parametrize(
    ("url", "named"),
    [
        (f"redis+sentinel://:{PASSWORD}@s1:26379", "names no service"),
        (f"redis+sentinel://:{PASSWORD}@s1:26379/", "names no service"),
        (f"redis+sentinel://:{PASSWORD}@s1:port/svc", "'s1:port'"),
        (f"redis+sentinel://:{PASSWORD}@s1:0/svc", "1 to 65535"),
        (f"redis+sentinel://:{PASSWORD}@s1:70000/svc", "1 to 65535"),
        (f"redis+sentinel://:{PASSWORD}@s1,,s2/svc", "has no host"),
        (f"redis+sentinel://:{PASSWORD}@::1/svc", "brackets"),
        (f"redis+sentinel://:{PASSWORD}@[::1/svc", "brackets"),
        (f"redis+sentinel://:{PASSWORD}@s1/svc/first", "db"),
        (f"redis+sentinel://:{PASSWORD}@s1/svc/1/2", "db"),
        (f"redis+sentinel://:{PASSWORD}@s1/svc?db=x", "db"),
        (f"redis+sentinel://:{PASSWORD}@s1/svc?socket_timeout=soon", "socket_timeout"),
        (f"redis+sentinel://:{PASSWORD}@s1/svc?sentinel_socket_timeout=-1", "sentinel_socket"),
        (f"redis+sentinel://:{PASSWORD}@s1/svc?sentinel_pasword={PASSWORD}", "sentinel_pasword"),
        (f"redis+sentinel://:a/{PASSWORD}@s1/svc", "escaped"),
    ],
)
def test_a_bad_url_is_named_without_its_password(url: str, named: str) -> None:
    for make in (check_url, sync_client, async_client):
        with pytest.raises(InvalidInput) as caught:
            make(url)
        assert caught.value.field == "url"
        assert named in str(caught.value)
        assert PASSWORD not in str(caught.value)


def test_every_entry_point_takes_a_sentinel_url(tmp_path: Path) -> None:
    url = "rediss+sentinel://s1,s2/mymaster/1"
    assert check_url(url) == url
    assert not is_tarantool(url)  # the storage's: a Redis URL
    config = tmp_path / "worker.yaml"
    config.write_text(f"redis:\n  url: {url}\n")
    assert load_config(config, env={}).redis_url == url


def test_a_client_made_with_redis_py_is_named_by_its_sentinels() -> None:
    # What a caller passes as client=: no URL, the pool's own record names it.
    client = Sentinel([("127.0.0.1", 26380), ("::1", 26381)]).master_for("svc")  # type: ignore[no-untyped-call]
    assert server_address(client) == "sentinel service 'svc' via 127.0.0.1:26380,[::1]:26381"
    made = AsyncSentinel([("h", 1)]).master_for("svc")  # type: ignore[no-untyped-call]
    assert server_address(made) == "sentinel service 'svc' via h:1"


def test_log_lines_hide_every_password() -> None:
    url = f"redis+sentinel://app:{PASSWORD}@s1,s2/svc?sentinel_password={PASSWORD}&db=1"
    shown = server_label(url)
    assert PASSWORD not in shown
    assert shown == "redis+sentinel://app:***@s1,s2/svc?sentinel_password=***&db=1"
    assert server_label("redis://h:6379/0") == "redis://h:6379/0"


# Against running sentinels


def test_a_queue_pushes_pops_and_finishes(sentinel: LocalSentinel, namespace: str) -> None:
    with FairQueue(sentinel.url, namespace) as queue:
        task_id = queue.push(Task(user_id="u", payload={"n": 1}), replicas=1, replica_timeout=5)
        [leased] = queue.pop(wait=1.0)
        assert (leased.task_id, leased.payload) == (task_id, {"n": 1})
        queue.finish(leased)
        assert queue.stats().counters["finished"] == 1
        address = server_address(queue.redis)
    host, port = sentinel.master_address()
    assert address.startswith(f"sentinel service {sentinel.service!r} via 127.0.0.1:")
    assert address.endswith(f"(master {host}:{port})")
    assert all(f"127.0.0.1:{s.port}" in address for s in sentinel.sentinels)


async def test_an_asyncio_queue_pushes_pops_and_finishes(
    sentinel: LocalSentinel, namespace: str
) -> None:
    queue = AsyncFairQueue(sentinel.url, namespace)
    task_id = await queue.push(Task(user_id="u", payload="x"), replicas=1, replica_timeout=5)
    [leased] = await queue.pop(wait=1.0)  # the waiting pipeline, on a sentinel's primary
    assert leased.task_id == task_id
    await queue.finish(leased)
    assert (await queue.stats()).counters["finished"] == 1
    assert f"(master 127.0.0.1:{sentinel.master_address()[1]})" in server_address(queue.redis)
    await queue.close()


def test_the_cli_pushes_and_shows_stats(sentinel: LocalSentinel, namespace: str) -> None:
    where = ["--url", sentinel.url, "--namespace", namespace]
    pushed = runner.invoke(app, ["push", "add", "--user", "alice", *where])
    assert pushed.exit_code == 0, pushed.output
    shown = runner.invoke(app, ["stats", *where])
    assert shown.exit_code == 0, shown.output
    assert "queued 1" in shown.output


def test_the_cli_says_a_bad_sentinel_url_in_one_line() -> None:
    result = runner.invoke(app, ["stats", "--url", f"redis+sentinel://:{PASSWORD}@s1:x/svc"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: url: sentinel 's1:x'")
    assert PASSWORD not in result.output


def dead_sentinels_url() -> str:
    ports = ",".join(f"127.0.0.1:{free_port()}" for _ in range(2))
    return f"redis+sentinel://:{PASSWORD}@{ports}/nowhere?sentinel_password={PASSWORD}"


def test_no_sentinel_answering_is_a_server_unavailable() -> None:
    url = dead_sentinels_url()
    with FairQueue(url, "any") as queue, pytest.raises(ServerUnavailable) as caught:
        queue.push(Task(user_id="u"))
    message = str(caught.value)
    assert caught.value.address in message
    assert "sentinel service 'nowhere' via 127.0.0.1:" in message
    assert url.split("@")[1].split("/")[0] in message  # both sentinels, as given
    assert PASSWORD not in message
    # One short line: redis-py's own error named its sentinel clients by their repr.
    assert "names a master of service 'nowhere'" in message
    assert "<redis" not in message


async def test_no_sentinel_answering_is_a_server_unavailable_for_asyncio() -> None:
    queue = AsyncFairQueue(dead_sentinels_url(), "any")
    with pytest.raises(ServerUnavailable, match="sentinel service 'nowhere' via") as caught:
        await queue.push(Task(user_id="u"))
    assert PASSWORD not in str(caught.value)
    assert "names a master of service 'nowhere'" in str(caught.value)
    assert "<redis" not in str(caught.value)
    await queue.close()


@pytest.mark.parametrize("engine", ENGINES)
def test_a_dead_primary_not_yet_replaced_is_named(engine: str, namespace: str) -> None:
    # The sentinels take it for down only after a minute: they name it meanwhile.
    with LocalSentinel(binary_of(engine), down_after_ms=60_000) as own:
        with FairQueue(own.url, namespace) as queue:
            queue.push(Task(user_id="u"))
            primary = own.master()
            own.kill(primary)
            with pytest.raises(ServerUnavailable) as caught:
                queue.push(Task(user_id="u"))
        assert f"(master 127.0.0.1:{primary.port})" in str(caught.value)
        assert f"sentinel service {own.service!r}" in str(caught.value)


# A failover under load


@pytest.mark.long
@pytest.mark.timeout(240)
@pytest.mark.parametrize("engine", ENGINES)
async def test_a_failover_loses_no_acknowledged_push(engine: str, namespace: str) -> None:
    own = LocalSentinel(binary_of(engine))
    await asyncio.to_thread(own.start)
    drill = Drill(own.url, namespace)
    drill.start()
    try:
        await drill.until(lambda: len(drill.pusher.confirmed) >= 200)
        primary = own.master()
        known = len(drill.pusher.tenants)
        own.kill(primary)
        promoted = await asyncio.to_thread(own.wait_for_master, primary)
        # Pushes and runs carry on against the promoted replica (which has no replica of
        # its own yet: its pushes are made but not confirmed).
        await drill.resumed(known)
        await asyncio.to_thread(own.restart, primary)  # back as the new primary's replica
        await drill.confirmed_again()
        await drill.finish()
        assert own.master() is promoted
    finally:
        await drill.close()
        await asyncio.to_thread(own.close)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_kept_connection_finds_the_new_primary_after_a_crash(engine: str, namespace: str) -> None:
    # The blocking client keeps a connection between calls; after the primary died and
    # the sentinels promoted its replica, the next call reconnects where they say (it
    # reconnected to the dead primary's address, and failed, until redis-py's own pool
    # handed out another connection).
    with LocalSentinel(binary_of(engine)) as own, FairQueue(own.url, namespace) as queue:
        queue.push(Task(user_id="u", task_id="before"), replicas=1)
        primary = own.master()
        own.kill(primary)
        promoted = own.wait_for_master(other_than=primary)
        queue.push(Task(user_id="u", task_id="after"))  # at once: no retry of ours
        assert {leased.task_id for leased in queue.pop(count=5)} == {"before", "after"}
        assert f"(master 127.0.0.1:{promoted.port})" in server_address(queue.redis)


async def test_a_sentinel_failover_is_followed(sentinel: LocalSentinel, namespace: str) -> None:
    """A failover asked of the sentinels (the primary stays up and is demoted): the same
    clients, blocking and asyncio, carry on against the new primary."""
    queue = FairQueue(sentinel.url, namespace)
    aqueue = AsyncFairQueue(sentinel.url, namespace)
    before = [queue.push(Task(user_id="u")), await aqueue.push(Task(user_id="u"))]
    old = sentinel.master()
    new = await asyncio.to_thread(sentinel.failover)
    assert new is not old
    await asyncio.to_thread(sentinel.wait_until_healthy)  # the old one is a replica now
    await asyncio.to_thread(wait_for, lambda: _pushed(queue, "after-blocking"), 60)
    await until(lambda: _async_pushed(aqueue, "after-asyncio"), 60)
    popped = await aqueue.pop(count=10)
    assert {task.task_id for task in popped} == {*before, "after-blocking", "after-asyncio"}
    for client in (queue.redis, aqueue.redis):
        assert f"(master 127.0.0.1:{new.port})" in server_address(client)
    queue.close()
    await aqueue.close()


def _pushed(queue: FairQueue, task_id: str) -> bool:
    """True once ``task_id`` is pushed; False if the server did not answer (a push sent
    again after its first went through is refused as a duplicate: it is there)."""
    try:
        queue.push(Task(user_id="u", task_id=task_id))
    except DuplicateTask:
        return True
    except ServerUnavailable:
        return False
    return True


async def _async_pushed(queue: AsyncFairQueue, task_id: str) -> bool:
    """:func:`_pushed` for asyncio."""
    try:
        await queue.push(Task(user_id="u", task_id=task_id))
    except DuplicateTask:
        return True
    except ServerUnavailable:
        return False
    return True
