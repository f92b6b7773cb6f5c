"""What a long-running loop (worker, scheduler) or a server answering requests (the JQ
master) does while the Redis / Valkey server is unreachable."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import redis
from redis.exceptions import (
    AskError,
    ClusterError,
    ReadOnlyError,
    RedisClusterException,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

# The server is unreachable, or it is failing over: a cluster's slots are moving (MOVED,
# ASK, TRYAGAIN, CLUSTERDOWN), or the node answering was a master a moment ago and is now
# a replica (READONLY) until its clients learn where the master is.
OUTAGE = (
    RedisConnectionError, RedisTimeoutError, OSError,
    ClusterError, TryAgainError, RedisClusterException, ReadOnlyError, AskError,
)  # fmt: skip
# The same, for a request handler: without OSError, which there could be anything else.
SERVER_AWAY = (
    RedisConnectionError, RedisTimeoutError,
    ClusterError, TryAgainError, RedisClusterException, ReadOnlyError, AskError,
)  # fmt: skip


# Where a connection's own code runs: redis-py's, and asyncio's streams and transports.
_CONNECTION_CODE = (str(Path(redis.__file__).parent), str(Path(asyncio.__file__).parent))
# uvloop's transports, where the worker runs on it: its frames name its .pyx sources.
_UVLOOP_CODE = "uvloop/"


@contextmanager
def connection_errors() -> Iterator[None]:
    """Raises a connection error where redis-py lets a connection that closed under a
    command escape as an ``AttributeError`` or ``TypeError`` from its connection code or
    asyncio's transport (redis/redis-py#4287; seen here when a cluster node dies while
    several tasks share the client), or as asyncio's ``RuntimeError`` of a write on a
    closed transport (uvloop's; seen when a worker stopped just after a failover). An error of any
    other code is left as it is."""
    try:
        yield
    except (AttributeError, TypeError, RuntimeError) as exc:
        if not _raised_in_connection_code(exc):
            raise
        raise RedisConnectionError(f"connection closed under a command ({exc})") from exc


def _raised_in_connection_code(exc: BaseException) -> bool:
    frame = exc.__traceback__
    if frame is None:
        return False
    while frame.tb_next is not None:
        frame = frame.tb_next
    filename = frame.tb_frame.f_code.co_filename
    return filename.startswith(_CONNECTION_CODE) or _UVLOOP_CODE in filename


def server_label(url: str) -> str:
    """``url`` fit for a log line: its passwords replaced by ``***``, the one before the
    host and those of options named ``*password`` (a sentinel URL's
    ``sentinel_password``)."""
    parts = urlsplit(url)
    if parts.password is not None:
        userinfo = f"{parts.username or ''}:***"
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{userinfo}@{host}")
    options = [_hidden(option) for option in parts.query.split("&")] if parts.query else []
    parts = parts._replace(query="&".join(options))
    return url if urlsplit(url) == parts else urlunsplit(parts)


def _hidden(option: str) -> str:
    """A URL's ``name=value`` option, its value replaced by ``***`` if it is a password."""
    name, equals, _ = option.partition("=")
    return f"{name}=***" if equals and unquote(name).lower().endswith("password") else option


# While the server stays away, an outage log says so again at most this often.
REMINDER_SECONDS = 30.0
# An outage is over once calls succeed and none failed for this long: a process whose
# calls go to several servers (a cluster's masters) sees some succeed while one of them
# fails over, and would say "back" and "lost" in turns.
SETTLE_SECONDS = 2.0


class OutageLog:
    """Logs once when the server stops answering, once when it answers again (a call
    succeeded, and none failed for :data:`SETTLE_SECONDS`), and in between a reminder at
    most every :data:`REMINDER_SECONDS`, however many calls fail: a few lines per
    outage, not one per call or per retry."""

    def __init__(
        self,
        logger: logging.Logger,
        server: str,
        meanwhile: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.server = server
        self.meanwhile = meanwhile  # what the process does until the server is back
        self.clock = clock
        self.since: float | None = None  # the clock's time of the first failure
        self.reminded = 0.0  # of the last line about this outage
        self.last_failure = 0.0  # of the latest failure

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, exc: BaseException) -> None:
        """A call failed because the server is unreachable."""
        now = self.last_failure = self.clock()
        detail = " ".join(str(exc).split()) or type(exc).__name__
        if self.since is None:
            self.since = self.reminded = now
            self.logger.error(
                "the server %s is unreachable (%s: %s); %s",
                self.server, type(exc).__name__, detail, self.meanwhile,
            )  # fmt: skip
        elif now - self.reminded >= REMINDER_SECONDS:
            self.reminded = now
            self.logger.warning(
                "the server %s is still unreachable after %.0f s (%s); %s",
                self.server, now - self.since, detail, self.meanwhile,
            )  # fmt: skip

    def answered(self) -> None:
        """A call succeeded: the outage, if any, is over if none failed lately."""
        now = self.clock()
        if self.since is not None and now - self.last_failure >= SETTLE_SECONDS:
            away = now - self.since
            self.since = None
            self.logger.warning("the server %s answers again (away %.1f s)", self.server, away)


@dataclass
class Backoff:
    """Exponential waits while the server is unreachable: 0.1 s doubling up to 1 s. Short,
    so that work resumes within a second of a failover's end (a cluster's replica is
    promoted a few seconds after its master died); an outage costs a failed connection a
    second per process, and its log stays quiet (:class:`OutageLog`)."""

    first: float = 0.1
    limit: float = 1.0
    current: float = 0.0

    def next(self) -> float:
        self.current = min(self.limit, max(self.first, self.current * 2))
        return self.current

    def reset(self) -> None:
        self.current = 0.0
