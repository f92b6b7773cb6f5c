"""Connections through Redis Sentinel: the sentinels name the primary of a service, and
name the new one after a failover.

The URL is the convention of the Redis-Sentinel-Url package, also accepted by Prefect and
docket (``PREFECT_SERVER_DOCKET_URL``) and by RedisVL, so one URL serves them all::

    redis+sentinel://[user:password@]host[:port][,host2[:port2]...]/service_name[/db][?options]
    rediss+sentinel://...   (TLS to the servers and to the sentinels)

The hosts are the sentinels (port 26379 unless given; an IPv6 address in brackets). The
user and password are the servers', as in a ``redis://`` URL. ``sentinel_username`` and
``sentinel_password`` authenticate to the sentinels, ``sentinel_socket_timeout`` and
``sentinel_socket_connect_timeout`` bound a question to one of them (2 s by default,
never more than the servers' own). Every other option is a redis-py URL option of the
server connections, read by redis-py's own URL parsing (``?socket_timeout=60``,
``?ssl_cert_reqs=none``); on ``rediss+sentinel://`` the ``ssl_*`` options apply to the
sentinel connections too, so one private CA covers both.

A client asks a sentinel where the primary is each time it opens a connection; a
connection to a primary that was demoted or died fails, and the next one goes where the
sentinels then say (redis-py's ``redis.sentinel``). The clients made here also close
their connections to the sentinels when they are closed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode

import redis
import redis.asyncio as aioredis
from redis.asyncio.connection import parse_url as async_parse_url
from redis.asyncio.retry import Retry as AsyncRetry
from redis.asyncio.sentinel import MasterNotFoundError as AsyncMasterNotFoundError
from redis.asyncio.sentinel import Sentinel as AsyncSentinel
from redis.asyncio.sentinel import SentinelConnectionPool as AsyncSentinelConnectionPool
from redis.backoff import NoBackoff
from redis.connection import parse_url
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel, SentinelConnectionPool

from fairque.errors import InvalidInput

SENTINEL_SCHEMES = {"redis+sentinel": "redis", "rediss+sentinel": "rediss"}
SENTINEL_PORT = 26379
# How long a question to one sentinel may take: a sentinel that does not answer is
# skipped for the next, so a dead one costs a client this much, not a server's 30 s.
SENTINEL_TIMEOUT = 2.0
# The options of the sentinel connections, and how each is read from the URL.
SENTINEL_OPTIONS = {
    "sentinel_username": str,
    "sentinel_password": str,
    "sentinel_socket_timeout": float,
    "sentinel_socket_connect_timeout": float,
}
GRAMMAR = "redis+sentinel://[user:password@]host[:port][,host[:port]...]/service_name[/db]"

# scheme://authority/path?query, split as RFC 3986 does (urlsplit would check the
# brackets of one IPv6 host where there may be several).
_URL = re.compile(
    r"(?P<scheme>[^:/?#]+)://(?P<authority>[^/?#]*)(?P<path>[^?#]*)(?:\?(?P<query>[^#]*))?"
)


def is_sentinel_url(url: str) -> bool:
    """True if ``url`` names sentinels (``redis+sentinel://`` or ``rediss+sentinel://``)."""
    return url.partition("://")[0].lower() in SENTINEL_SCHEMES


@dataclass(frozen=True)
class SentinelURL:
    """What a sentinel URL says: the service, where its sentinels are, and the options
    of the server and the sentinel connections."""

    service: str
    sentinels: list[tuple[str, int]]
    # A redis:// (rediss://) URL of the first sentinel's host with the URL's user,
    # password, db and server options: redis-py's URL parsing reads them from it (the
    # host and port it names are not used).
    server_url: str
    sentinel_options: dict[str, Any]  # the sentinel_* options, without their prefix
    tls: bool


def parse_sentinel_url(url: str) -> SentinelURL:
    """Reads a sentinel URL, raising :class:`InvalidInput` (field ``url``) that says what
    is wrong and never repeats the password."""
    match = _URL.fullmatch(url.partition("#")[0])
    scheme = url.partition("://")[0].lower()
    if match is None or scheme not in SENTINEL_SCHEMES:
        raise InvalidInput("url", f"a sentinel URL reads {GRAMMAR}")
    userinfo, at, hosts = match["authority"].rpartition("@")
    if "@" in match["path"]:  # an '@' after the hosts: a password with an unescaped '/'
        raise InvalidInput("url", "characters such as '/' in the password must be %-escaped")
    sentinels = [_sentinel_address(member) for member in hosts.split(",")]
    service, db = _service_and_db(match["path"])
    server_options: list[tuple[str, str]] = []
    sentinel_options: dict[str, Any] = {}
    for name, value in parse_qsl(match["query"] or "", keep_blank_values=True):
        if not name.startswith("sentinel_"):
            server_options.append((name, value))
        elif name in SENTINEL_OPTIONS:
            sentinel_options[name.removeprefix("sentinel_")] = _option(name, value)
        else:
            known = ", ".join(SENTINEL_OPTIONS)
            raise InvalidInput("url", f"unknown option {name!r} (the sentinels take {known})")
    first_host, first_port = sentinels[0]
    host = f"[{first_host}]" if ":" in first_host else first_host
    path = f"/{db}" if db is not None else ""
    query = f"?{urlencode(server_options)}" if server_options else ""
    server_scheme = SENTINEL_SCHEMES[scheme]
    server_url = f"{server_scheme}://{userinfo}{at}{host}:{first_port}{path}{query}"
    return SentinelURL(service, sentinels, server_url, sentinel_options, server_scheme == "rediss")


def _sentinel_address(member: str) -> tuple[str, int]:
    """``(host, port)`` of one sentinel of the URL: ``host``, ``host:port``, ``[v6]``,
    ``[v6]:port``."""
    if member.startswith("["):
        host, closed, port = member[1:].partition("]")
        if not closed or (port and not port.startswith(":")):
            raise InvalidInput(
                "url", f"sentinel {member!r}: write [IPv6 address in brackets][:port]"
            )
        port = port.removeprefix(":")
    elif member.count(":") > 1:
        raise InvalidInput("url", f"sentinel {member!r}: an IPv6 address goes in brackets")
    else:
        host, _, port = member.partition(":")
    if not host:
        raise InvalidInput("url", f"sentinel {member!r} has no host ({GRAMMAR})")
    if not port:
        return unquote(host), SENTINEL_PORT
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidInput("url", f"sentinel {member!r}: the port must be 1 to 65535")
    return unquote(host), int(port)


def _service_and_db(path: str) -> tuple[str, int | None]:
    """The service name and the db number of the URL's path, ``/service_name[/db]``."""
    service, _, db = path.removeprefix("/").partition("/")
    db = db.removesuffix("/")
    if not service:
        raise InvalidInput("url", f"names no service: a sentinel URL reads {GRAMMAR}")
    if not db:
        return unquote(service), None
    if not db.isdigit():
        raise InvalidInput("url", f"the db after the service name must be a number, not {db!r}")
    return unquote(service), int(db)


def _option(name: str, value: str) -> Any:
    """A sentinel option's value (the password's is never repeated)."""
    read = SENTINEL_OPTIONS[name]
    try:
        parsed = read(value)
    except ValueError:
        raise InvalidInput("url", f"{name} must be a number of seconds, not {value!r}") from None
    if read is float and not parsed > 0:
        raise InvalidInput("url", f"{name} must be more than 0 seconds, not {value!r}")
    return parsed


def _server_options(
    parsed: SentinelURL, url_options: Mapping[str, Any], options: Mapping[str, Any]
) -> dict[str, Any]:
    """The server connections' options: ``options`` (the caller's, with fairque's
    timeouts), then the URL's, which win as in ``redis.Redis.from_url``. The address is
    the sentinels' to give; TLS is asked for with ``ssl``, for which redis-py's sentinel
    pool picks its TLS connection class."""
    merged = {**options, **url_options, "ssl": parsed.tls}
    for name in ("host", "port", "connection_class"):
        merged.pop(name, None)
    return merged


def _sentinel_kwargs(parsed: SentinelURL, server: Mapping[str, Any], retry: Any) -> dict[str, Any]:
    """The sentinel connections' options: their own timeouts (at most the servers'),
    their credentials, and on TLS the servers' ``ssl_*`` options. No retry of a question
    to one sentinel: the next sentinel is asked instead."""
    timeouts = {
        name: min(SENTINEL_TIMEOUT, server.get(name) or SENTINEL_TIMEOUT)
        for name in ("socket_timeout", "socket_connect_timeout")
    }
    tls = {name: value for name, value in server.items() if name.startswith("ssl")}
    return {**timeouts, **(tls if parsed.tls else {}), "retry": retry, **parsed.sentinel_options}


def _read_url(
    url: str, options: Mapping[str, Any], parse: Callable[[str], Mapping[str, Any]]
) -> tuple[SentinelURL, dict[str, Any]]:
    """The URL, and its server connections' options read by ``parse``, redis-py's URL
    parsing (the blocking or the asyncio one)."""
    parsed = parse_sentinel_url(url)
    try:
        url_options = parse(parsed.server_url)
    except ValueError as exc:  # redis-py's words name the option, not the password
        raise InvalidInput("url", str(exc)) from None
    return parsed, _server_options(parsed, url_options, options)


def check_sentinel_url(url: str) -> None:
    """Refuses a bad sentinel URL (see :func:`parse_sentinel_url`), its server options
    too, without making a client."""
    _read_url(url, {}, parse_url)


def _no_master(service: str, sentinels: list[Any]) -> MasterNotFoundError:
    """redis-py's error names its sentinel clients by their whole repr: this one names
    their addresses, in one short line."""
    return MasterNotFoundError(
        f"no sentinel at {_addresses(sentinels)} names a master of service {service!r} "
        "(unreachable, not monitoring it, or seeing it down)"
    )


def _addresses(sentinels: list[Any]) -> str:
    """``host:port,...`` of redis-py's sentinel clients."""
    kwargs = [sentinel.connection_pool.connection_kwargs for sentinel in sentinels]
    return ",".join(_address(options["host"], options["port"]) for options in kwargs)


class ServiceSentinel(Sentinel):
    """redis-py's ``Sentinel``, its error when no sentinel names a master in one line."""

    def discover_master(self, service_name: str) -> Any:
        try:
            return super().discover_master(service_name)  # type: ignore[no-untyped-call]
        except MasterNotFoundError:
            raise _no_master(service_name, self.sentinels) from None


class AsyncServiceSentinel(AsyncSentinel):
    """:class:`ServiceSentinel` for asyncio."""

    async def discover_master(self, service_name: str) -> Any:
        try:
            return await super().discover_master(service_name)
        except AsyncMasterNotFoundError:  # its own class, which its pool catches
            raise AsyncMasterNotFoundError(str(_no_master(service_name, self.sentinels))) from None


class SentinelClient(redis.Redis):
    """A blocking client of a service's primary that also closes its connections to the
    sentinels when closed (redis-py leaves them to the ``Sentinel`` object, which the
    caller of :func:`sync_client` never sees)."""

    def close(self) -> None:
        super().close()
        pool = self.connection_pool
        assert isinstance(pool, SentinelConnectionPool)
        pool.sentinel_manager.close()


class AsyncSentinelClient(aioredis.Redis):
    """:class:`SentinelClient` for asyncio."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await super().aclose(close_connection_pool)
        pool = self.connection_pool
        assert isinstance(pool, AsyncSentinelConnectionPool)
        await pool.sentinel_manager.aclose()


def sync_client(url: str, **options: Any) -> redis.Redis:
    """A blocking client of the primary of the URL's service (nothing is sent before its
    first command). ``options`` are the server connections', the URL's winning."""
    parsed, server = _read_url(url, options, parse_url)
    sentinel_kwargs = _sentinel_kwargs(parsed, server, Retry(NoBackoff(), 0))
    try:
        sentinel = ServiceSentinel(parsed.sentinels, sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call]
        client = sentinel.master_for(parsed.service, redis_class=SentinelClient, **server)  # type: ignore[no-untyped-call]
    except TypeError as exc:  # an option redis-py does not know
        raise InvalidInput("url", str(exc)) from None
    assert isinstance(client, SentinelClient)
    return client


class BlockingSentinelConnectionPool(AsyncSentinelConnectionPool, aioredis.BlockingConnectionPool):
    """redis-py's asyncio pool of a sentinel service's connections, bounded as fairque's
    asyncio pools are (:data:`fairque.engine.connect.MAX_CONNECTIONS`): a call beyond its
    connections waits for one rather than failing as if the server were away. The
    sentinel pool finds the address; the blocking pool hands out the connections."""


def async_client(
    url: str, packing: Mapping[type, type], *, max_connections: int, timeout: float, **options: Any
) -> aioredis.Redis:
    """An asyncio client of the primary of the URL's service, its pool bounded to
    ``max_connections`` (a call waits ``timeout`` s for a free one) and its connections
    of the class ``packing`` gives for redis-py's (one that packs commands with hiredis)."""
    parsed, server = _read_url(url, options, async_parse_url)
    sentinel_kwargs = _sentinel_kwargs(parsed, server, AsyncRetry(NoBackoff(), 0))
    try:
        sentinel = AsyncServiceSentinel(parsed.sentinels, sentinel_kwargs=sentinel_kwargs)  # type: ignore[no-untyped-call]
        client = sentinel.master_for(
            parsed.service,
            redis_class=AsyncSentinelClient,
            connection_pool_class=BlockingSentinelConnectionPool,
            max_connections=max_connections,
            timeout=timeout,
            **server,
        )
    except TypeError as exc:  # an option redis-py does not know
        raise InvalidInput("url", str(exc)) from None
    pool = client.connection_pool
    pool.connection_class = packing.get(pool.connection_class, pool.connection_class)
    assert isinstance(client, AsyncSentinelClient)
    return client


def is_sentinel_pool(pool: Any) -> bool:
    """True for the connection pool of a client made by redis-py's ``Sentinel.master_for``
    (blocking or asyncio), whether by this module or by its caller."""
    return isinstance(pool, (SentinelConnectionPool, AsyncSentinelConnectionPool))


def sentinel_address(pool: Any) -> str:
    """How an error names the server of a sentinel pool: the service, its sentinels (in
    the order the client asks them: redis-py moves the last to answer first), and the
    primary the pool last connected to, if any. Nothing is asked of a server for it."""
    via = _addresses(pool.sentinel_manager.sentinels)
    named = f"sentinel service {pool.service_name!r} via {via}"
    if pool.master_address is None:
        return named
    return f"{named} (master {_address(*pool.master_address)})"


def _address(host: str, port: int) -> str:
    """``host:port``, an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
