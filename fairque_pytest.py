"""fairque's pytest plugin: a throwaway server for the test run and a queue on a fresh
namespace per test (docs: "Testing your tasks").

pytest loads it by itself once fairque is installed (the ``pytest11`` entry point). It
lives outside the ``fairque`` package so that loading it imports nothing of fairque: a
test run that uses none of its fixtures starts no server and pays nothing.

- ``fairque_url`` (session): the server; ``--fairque-url URL`` or ``$FAIRQUE_TEST_URL``
  names one of your own, else an embedded Valkey on a free loopback port is started at
  the first use and stopped at the end of the run (one per xdist process);
- ``fairque_namespace``: a namespace of its own for each test;
- ``fairque_settings``: the namespace's settings (retries at once, without backoff:
  override the fixture to change them);
- ``fairque_functions``: the task functions whose declared defaults
  (``@task(max_retries=...)``) the namespace gets, as a worker serving them sets them
  when it starts (every ``@task``: override the fixture for a registry of your own);
- ``fairque_queue`` / ``fairque_async_queue``: a :class:`~fairque.FairQueue` /
  :class:`~fairque.AsyncFairQueue` of that namespace (the asyncio one needs
  pytest-asyncio).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from fairque import AsyncFairQueue, FairQueue, QueueSettings
    from fairque.worker import Registry

URL_OPTION = "--fairque-url"
URL_ENV = "FAIRQUE_TEST_URL"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("fairque").addoption(
        URL_OPTION,
        metavar="URL",
        help=f"server for the fairque fixtures (default: ${URL_ENV}, else a throwaway "
        "embedded Valkey)",
    )


@pytest.fixture(scope="session")
def fairque_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """The server of the fairque fixtures, for the whole test run."""
    given = request.config.getoption(URL_OPTION) or os.environ.get(URL_ENV)
    if given:
        yield given
        return
    from fairque.servers.embedded import LocalServer

    with LocalServer() as server:
        yield server.url


@pytest.fixture
def fairque_namespace() -> str:
    """A namespace no other test uses."""
    return f"test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def fairque_settings() -> QueueSettings:
    """The settings of each test's namespace: a failed attempt is retried at once, so one
    ``drain`` runs every retry."""
    from fairque import QueueSettings

    return QueueSettings(retry_backoff_base=0)


@pytest.fixture
def fairque_functions() -> Registry:
    """The task functions the tests' namespaces are set up for: every ``@task``."""
    from fairque.worker import registry

    return registry


@pytest.fixture
def fairque_queue(
    fairque_url: str,
    fairque_namespace: str,
    fairque_settings: QueueSettings,
    fairque_functions: Registry,
) -> Iterator[FairQueue]:
    """A blocking queue of this test's namespace."""
    from fairque import FairQueue

    with FairQueue(fairque_url, fairque_namespace, settings=fairque_settings) as queue:
        for name, defaults in fairque_functions.declared_defaults():
            queue.set_limits(name, **defaults)
        yield queue


try:
    import pytest_asyncio
except ImportError:  # pragma: no cover - the asyncio fixture needs pytest-asyncio
    pass
else:

    @pytest_asyncio.fixture
    async def fairque_async_queue(
        fairque_url: str,
        fairque_namespace: str,
        fairque_settings: QueueSettings,
        fairque_functions: Registry,
    ) -> AsyncIterator[AsyncFairQueue]:
        """An asyncio queue of this test's namespace."""
        from fairque import AsyncFairQueue

        async with AsyncFairQueue(
            fairque_url, fairque_namespace, settings=fairque_settings
        ) as queue:
            for name, defaults in fairque_functions.declared_defaults():
                await queue.set_limits(name, **defaults)
            yield queue
