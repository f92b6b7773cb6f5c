"""Fixtures: real servers on free loopback ports, a fresh namespace per test.

Every engine test runs on the embedded Valkey binary and, when Debian's
``redis-server`` is installed (CI installs it), on Redis too. Tests marked ``cluster``
(``pytestmark = pytest.mark.cluster`` in a module) also run on a local Valkey Cluster and
Redis Cluster (3 masters, a replica each), started once per session: their ``server``
is then a :class:`LocalCluster`, whose ``url`` works wherever a server's does.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TypeVar

import pytest

from fairque import AsyncFairQueue, FairQueue, QueueSettings
from fairque.engine.connect import SyncClient
from fairque.servers.embedded import LocalServer
from fairque.servers.local_cluster import LocalCluster
from fairque.servers.local_tarantool import LocalTarantool, find_binary

T = TypeVar("T")
Server = LocalServer | LocalCluster  # what the ``server`` fixture gives: has a ``url``

REDIS = shutil.which("redis-server")
TARANTOOL = find_binary()
ENGINES = ["valkey"] + (["redis"] if REDIS else [])
CLUSTERS = [f"{engine}-cluster" for engine in ENGINES]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "cluster: also run on the local clusters")
    config.addinivalue_line(
        "markers", "one_engine: the code it tests is the same on every engine (the HTTP "
        "layer, a long stress run): run it on the embedded Valkey only",
    )  # fmt: skip
    config.addinivalue_line("markers", "long: takes twenty seconds or more: run it first")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Runs a test on the clusters only if it is marked ``cluster``, and on the embedded
    Valkey alone if it is marked ``one_engine``."""
    chosen: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        engine = getattr(getattr(item, "callspec", None), "params", {}).get("server", "")
        if item.get_closest_marker("one_engine") is not None:
            left_out = engine not in ("", "valkey")
        else:
            left_out = engine.endswith("-cluster") and item.get_closest_marker("cluster") is None
        (dropped if left_out else chosen).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    # The longest tests first: started last, one of them would keep a process busy after
    # the others ran out of tests (the order within each group is kept).
    items[:] = sorted(chosen, key=lambda item: item.get_closest_marker("long") is None)


@pytest.fixture(autouse=True)
def fairque_logging() -> Iterator[None]:
    """Undoes what a CLI command run in-process did to the ``fairque`` logger: its handler
    writes to that test's captured stderr, closed afterwards, and it stops propagation,
    so later tests' log lines would be lost instead of reported with their failure."""
    logger = logging.getLogger("fairque")
    saved = (logger.handlers[:], logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved


@pytest.fixture(scope="session")
def valkey_cluster() -> Iterator[LocalCluster]:
    with LocalCluster() as started:
        yield started


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(REDIS) as started:
        yield started


@pytest.fixture(scope="session", params=CLUSTERS)
def cluster(request: pytest.FixtureRequest) -> LocalCluster:
    """A local cluster per engine, started once per session (shared with ``server``)."""
    started: LocalCluster = request.getfixturevalue(request.param.replace("-", "_"))
    return started


@pytest.fixture(scope="session", params=ENGINES + CLUSTERS)
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    """One server per engine for the whole session (a cluster for ``cluster`` tests)."""
    if request.param.endswith("-cluster"):
        yield request.getfixturevalue(request.param.replace("-", "_"))
        return
    binary = None if request.param == "valkey" else REDIS
    with LocalServer(binary) as started:
        yield started


@pytest.fixture(scope="session")
def tarantool_server() -> Iterator[LocalTarantool]:
    """Debian's tarantool on a free loopback port with a temporary data folder, started
    once per session and stopped by its PID (tests share it through namespaces)."""
    if TARANTOOL is None:
        pytest.skip("no tarantool binary: apt-get install tarantool (.ci/run does)")
    with LocalTarantool(TARANTOOL) as started:
        yield started


@pytest.fixture
def namespace() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def make_queue(server: Server, namespace: str) -> Iterator[Callable[..., FairQueue]]:
    """Builds clients of this test's namespace (each with its own connection pool)."""
    made: list[FairQueue] = []

    def make(settings: QueueSettings | None = None) -> FairQueue:
        queue = FairQueue(server.url, namespace, settings=settings)
        made.append(queue)
        return queue

    yield make
    for queue in made:
        queue.close()


@pytest.fixture
def queue(make_queue: Callable[..., FairQueue]) -> FairQueue:
    return make_queue()


@pytest.fixture
async def aqueue(server: Server, namespace: str) -> AsyncIterator[AsyncFairQueue]:
    queue = AsyncFairQueue(server.url, namespace)
    yield queue
    await queue.close()


StartCli = Callable[..., "subprocess.Popen[str]"]


@pytest.fixture
def start_cli() -> Iterator[StartCli]:
    """Starts ``fairque`` commands as processes (``start(*args, env={...})``, stderr piped);
    ends the ones still running, by PID."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
        command = [sys.executable, "-c", "from fairque.cli import main; main()", *args]
        environment = {**os.environ, **env}
        process = subprocess.Popen(command, env=environment, text=True, stderr=subprocess.PIPE)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)


SCAN_COUNT = 10_000

# Keys that change by themselves while processes run: maintenance rounds, the live
# workers' registry (the master and workers keep them up to date every few seconds), and
# the pops' promise that nothing is due, which expires by itself.
SELF_KEPT = ("maintenance", "maintenance:quiet", "deps:cursor", "workers", "workers:expiry",
             "workers:functions")  # fmt: skip


def namespace_keys(client: SyncClient, namespace: str) -> dict[bytes, bytes]:
    """Every key of the namespace with a dump of its value (to prove nothing changed), but
    the ones maintenance and the registry of workers keep by themselves. The session's
    server holds every test's keys: a large SCAN count keeps this a few round trips."""
    prefix = f"fq:{{{namespace}}}:"
    skipped = {(prefix + name).encode() for name in SELF_KEPT}
    keys = client.scan_iter(f"{prefix}*", count=SCAN_COUNT)
    return {key: client.dump(key) or b"" for key in keys if key not in skipped}


def waiting_workers(queue: FairQueue) -> int:
    """Workers waiting for work: subscribed to the queue's wake channel, or blocked in a
    pop, on the node that serves the namespace (one test's workers run at a time on a
    server, so every blocked client is one of them)."""
    channel = queue.namespace.wake_channel
    node = queue.executor.client_for(channel)
    subscribed = int(node.pubsub_shardnumsub(channel)[0][1])
    return subscribed + sum(client["cmd"] == "blpop" for client in node.client_list())


def wait_for(probe: Callable[[], T], timeout: float = 10.0, interval: float = 0.01) -> T:
    """Polls ``probe`` until it returns something truthy; fails after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        time.sleep(interval)


async def until(probe: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    """Polls the coroutine ``probe`` until true; fails after ``timeout`` s."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await probe():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"condition not met within {timeout} s")
        await asyncio.sleep(0.01)
