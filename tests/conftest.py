"""Fixtures: real servers on free loopback ports, a fresh namespace per test.

Every engine test runs on the embedded Valkey binary and, when Debian's
``redis-server`` is installed (CI installs it), on Redis too.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TypeVar

import pytest
import redis

from fairque import AsyncFairQueue, FairQueue, QueueSettings
from fairque.embedded import LocalServer

T = TypeVar("T")

ENGINES = ["valkey"] + (["redis"] if shutil.which("redis-server") else [])


@pytest.fixture(scope="session", params=ENGINES)
def server(request: pytest.FixtureRequest) -> Iterator[LocalServer]:
    """One server per engine for the whole session."""
    binary = None if request.param == "valkey" else shutil.which("redis-server")
    with LocalServer(binary) as started:
        yield started


@pytest.fixture
def namespace() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def make_queue(server: LocalServer, namespace: str) -> Iterator[Callable[..., FairQueue]]:
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
async def aqueue(server: LocalServer, namespace: str) -> AsyncIterator[AsyncFairQueue]:
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


def namespace_keys(client: redis.Redis, namespace: str) -> dict[bytes, bytes]:
    """Every key of the namespace with a dump of its value (to prove nothing changed)."""
    return {key: client.dump(key) or b"" for key in client.scan_iter(f"fq:{{{namespace}}}:*")}


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
