"""The storage in Tarantool: numbered queues kept by Lua stored procedures.

Each operation is one call of the persistent function ``fairque_storage`` (the source is
``tarantool_procedures.lua`` beside this module), which runs it in one memtx transaction
with the server's clock: atomic like the Redis scripts, and durable once acknowledged
(the WAL is written before the reply). The function is installed by the first client
that connects (it needs the rights to create spaces and functions) and replaced when a
newer fairque brings other procedures.

Two connections, each native to its mode, send the calls that :class:`TarantoolOps`
builds and read the replies with its parsers: :class:`TarantoolConnection` on
``tarantool`` (tarantool-python, blocking sockets) and :class:`AsyncTarantoolConnection`
on ``asynctnt`` (asyncio, many calls in flight on one connection). The storages on them
are :class:`~fairque.storage.async_tarantool.AsyncTarantoolStorage` and its generated
twin :class:`~fairque.storage.blocking_tarantool.TarantoolStorage`.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cache
from importlib import resources
from typing import Any, Generic, TypeVar
from urllib.parse import unquote, urlsplit

import asynctnt
import tarantool

from fairque.errors import FairQueueError, InvalidInput, from_script_error
from fairque.storage.models import (
    PutTaskRequest,
    QueueStat,
    RetryInfo,
    Stats,
    StorageTask,
)
from fairque.storage.plan import (
    WorkerReport,
    decode_reports,
    encode_report,
)
from fairque.storage.requests import Requests

T = TypeVar("T")
FUNCTION = "fairque_storage"  # the persistent function every call goes through
DEFAULT_PORT = 3301
MICROS = 1_000_000
CONNECT_TIMEOUT = 3.0  # seconds to reach the server before a call gives up
REQUEST_TIMEOUT = 60.0  # seconds for one call's reply (10,000 tasks fit well within)
_NO_SUCH_PROC = 33  # Tarantool's ER_NO_SUCH_PROC: the function is not installed (yet)
_ACCESS_DENIED = 42  # a user who may call the function but not install it
_PUT_NOW, _PUT_AT, _PUT_AFTER = 0, 1, 2

# tarantool-python warns before raising NetworkError when a reconnect fails; the error
# (as TarantoolUnreachable) says it already, and a worker retrying would repeat it.
warnings.filterwarnings("ignore", category=tarantool.error.NetworkWarning)


class TarantoolUnreachable(FairQueueError, ConnectionError):  # noqa: N818
    """The server did not answer: nothing was done, or (for a call cut in flight) it is
    unknown whether it was. A ``ConnectionError``, so workers wait and try again."""

    def __init__(self, address: str, reason: object) -> None:
        self.address = address
        super().__init__(f"cannot reach Tarantool at {address}: {_one_line(reason)}")


class StoreFull(FairQueueError):  # noqa: N818
    """Tarantool has no memory left for the tasks put: none of them was stored."""


def _one_line(reason: object) -> str:
    text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
    return " ".join(text.split()) or type(reason).__name__


@dataclass(frozen=True)
class TarantoolAddress:
    """``tarantool://[user[:password]@]host[:port]``; guest when no user is given."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    user: str | None = None
    password: str | None = None

    @classmethod
    def parse(cls, url: str) -> TarantoolAddress:
        parts = urlsplit(url)
        if parts.scheme != "tarantool" or not parts.hostname:
            raise InvalidInput("url", f"expected tarantool://host:port, got {url!r}")
        try:
            port = parts.port or DEFAULT_PORT
        except ValueError:
            raise InvalidInput("url", f"bad port in {url!r}") from None
        user = unquote(parts.username) if parts.username else None
        password = unquote(parts.password) if parts.password else None
        return cls(parts.hostname, port, user, password)

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class TarantoolEndpoint:
    """Where a client connects, and how long it waits to connect and for each reply."""

    address: TarantoolAddress
    connect_timeout: float = CONNECT_TIMEOUT
    request_timeout: float = REQUEST_TIMEOUT


@dataclass(frozen=True)
class TarantoolCall(Generic[T]):
    """One call of the stored function: its operation, arguments, and reply parser."""

    op: str
    args: tuple[Any, ...]
    parse: Callable[[Any], T]


def _micros(moment: datetime) -> int:
    return int(moment.timestamp() * MICROS)


def _time(micros: int) -> datetime:
    return datetime.fromtimestamp(micros / MICROS, timezone.utc)


def _bytes(value: bytes | str) -> bytes:
    # A Lua string goes back as a MessagePack str; asynctnt decodes one that is valid
    # UTF-8 to str, so the payload's exact bytes are its UTF-8 encoding.
    return value.encode() if isinstance(value, str) else value


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class TarantoolOps:
    """The sans-IO core: storage requests (and the Manager's board) as calls of
    ``fairque_storage(op, namespace, ...)``, and their replies as fairque types."""

    def __init__(self, namespace: str = "default", visibility_timeout: float | None = None):
        if not isinstance(namespace, str) or not 1 <= len(namespace) <= 200:
            raise InvalidInput("namespace", "must be a string of 1 to 200 characters")
        self.namespace = namespace
        self.requests = Requests(visibility_timeout)

    def _call(self, op: str, args: Sequence[Any], parse: Callable[[Any], T]) -> TarantoolCall[T]:
        return TarantoolCall(op, (op, self.namespace, *args), parse)

    def get_task(
        self, queue_num: int, count: int, visibility_timeout: float | None = None
    ) -> TarantoolCall[list[StorageTask]]:
        take = self.requests.take(queue_num, count, visibility_timeout)

        def parse(rows: list[list[Any]]) -> list[StorageTask]:
            return [
                StorageTask(
                    row[0],
                    take.queue_num,
                    _bytes(row[1]),
                    row[2],
                    _time(row[3]),
                    _time(row[4]),
                    None if row[5] is None else _time(row[5]),
                )
                for row in rows
            ]

        args = (take.queue_num, take.count, int(take.visibility * MICROS))
        return self._call("get", args, parse)

    def done_task(self, task_ids: Sequence[int]) -> TarantoolCall[int]:
        return self._call("done", (self.requests.done(task_ids),), int)

    def retry_task(self, retries: Sequence[RetryInfo]) -> TarantoolCall[int]:
        rows = [[task_id, _micros(moment)] for task_id, moment in self.requests.retries(retries)]
        return self._call("retry", (rows,), int)

    def _put_rows(self, requests: Sequence[PutTaskRequest]) -> list[list[Any]]:
        rows = []
        for put in self.requests.puts(requests):
            if put.start_time is not None:
                how, when = _PUT_AT, _micros(put.start_time)
            elif put.delay is not None:
                how, when = _PUT_AFTER, int(put.delay.total_seconds() * MICROS)
            else:
                how, when = _PUT_NOW, 0
            rows.append([put.queue_num, how, when, put.data])
        return rows

    def put_tasks(self, requests: Sequence[PutTaskRequest]) -> TarantoolCall[list[int]]:
        return self._call("put", (self._put_rows(requests),), list)

    def put_task(self, request: PutTaskRequest) -> TarantoolCall[int]:
        return self._call("put", (self._put_rows([request]),), lambda ids: int(ids[0]))

    def get_stat(self) -> TarantoolCall[Stats]:
        def parse(rows: list[list[int]]) -> Stats:
            return Stats({row[0]: QueueStat(*row) for row in sorted(rows)})

        return self._call("stat", (), parse)

    def beat(self, report: WorkerReport, ttl: float) -> TarantoolCall[list[int] | None]:
        beat = self.requests.beat(report, ttl)
        args = (beat.report.worker_id, encode_report(beat.report), int(beat.ttl * MICROS))
        return self._call("beat", args, lambda queues: None if queues is None else list(queues))

    def workers(self) -> TarantoolCall[list[WorkerReport]]:
        return self._call("workers", (), lambda blobs: decode_reports([_bytes(b) for b in blobs]))

    def publish_plan(self, plan: Mapping[str, Sequence[int]]) -> TarantoolCall[int]:
        rows = [[worker, queues] for worker, queues in self.requests.plan(plan).items()]
        return self._call("publish", (rows,), int)

    def read_plan(self) -> TarantoolCall[dict[str, list[int]]]:
        def parse(rows: list[list[Any]]) -> dict[str, list[int]]:
            return {_text(worker): list(queues) for worker, queues in rows}

        return self._call("plan", (), parse)


@cache
def procedures() -> str:
    """The Lua source of the stored procedures."""
    return resources.files(__package__).joinpath("tarantool_procedures.lua").read_text("utf-8")


# Evaluated by the client with (source, name): runs the chunk's 'install'.
INSTALL = "local source, name = ...; return assert(loadstring(source))()('install', name, source)"


def _install_args() -> tuple[str, str]:
    return procedures(), FUNCTION


def _database_error(address: TarantoolAddress, code: int, message: bytes | str) -> FairQueueError:
    text = _text(message)
    if text.startswith("INVALID "):
        return from_script_error(text)
    if text.startswith("FULL "):
        limit = int(text.removeprefix("FULL ")) // 2**20
        return StoreFull(
            f"Tarantool at {address}: the store is full (memtx_memory is {limit} MiB): "
            "nothing was put; finishing tasks frees room, or give the server more "
            "(FAIRQUE_TARANTOOL_MEMORY)"
        )
    if code in (_NO_SUCH_PROC, _ACCESS_DENIED):  # a stock server, or a user without rights
        user = address.user or "guest"
        return FairQueueError(
            f"Tarantool at {address}: user {user} may not call fairque's stored function "
            f"({_one_line(text)}): start the server with fairque's instance file "
            "(fairque/servers/tarantool_instance.lua), or install it by connecting once as "
            f"a user with the 'super' role and grant it: box.schema.user.grant('{user}', "
            f"'execute', 'function', '{FUNCTION}')"
        )
    return FairQueueError(f"Tarantool at {address}: {_one_line(text)} (error {code})")


class TarantoolConnection:
    """One blocking connection (``tarantool``, tarantool-python) that sends
    :class:`TarantoolCall` s, one at a time across threads; it connects, and installs the
    stored function, on first use and again after the connection was lost."""

    def __init__(self, endpoint: TarantoolEndpoint) -> None:
        self.endpoint = endpoint
        self.address = endpoint.address
        self._lock = threading.Lock()
        self._connection: Any = None
        self._installed = False  # by this connection's install, since it connected
        self._install_denied = False

    def _connect(self) -> Any:
        if self._connection is None:
            self._connection = tarantool.Connection(
                self.address.host,
                self.address.port,
                user=self.address.user,
                password=self.address.password,
                encoding=None,  # payloads are bytes, never decoded
                fetch_schema=False,
                connection_timeout=self.endpoint.connect_timeout,
                socket_timeout=self.endpoint.request_timeout,
                reconnect_max_attempts=0,  # one try per call: callers decide on retries
                reconnect_delay=0,
            )
        if not self._installed and not self._install_denied:
            try:
                self._connection.eval(INSTALL, *_install_args())
            except tarantool.DatabaseError as exc:
                if exc.code != _ACCESS_DENIED:
                    raise
                self._install_denied = True  # a user who may only call it: the one there
            else:
                self._installed = True
        return self._connection

    def _send(self, call: TarantoolCall[T], again: bool = False) -> T:
        try:
            reply = self._connect().call(FUNCTION, *call.args)
        except tarantool.DatabaseError as exc:
            if isinstance(exc, tarantool.error.NetworkError):
                raise
            if exc.code != _NO_SUCH_PROC or not self._installed or again:
                raise _database_error(self.address, exc.code, exc.message) from None
            self._installed = False  # the server lost it (a new data folder): once more
            return self._send(call, again=True)
        return call.parse(reply.data[0])

    def execute(self, call: TarantoolCall[T]) -> T:
        """Sends one call and parses its reply."""
        with self._lock:
            try:
                return self._send(call)
            except (tarantool.error.NetworkError, OSError) as exc:
                self._drop()
                raise TarantoolUnreachable(str(self.address), exc) from None

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._connection = None

    def close(self) -> None:
        with self._lock:
            self._drop()


_ASYNC_NETWORK = (asynctnt.exceptions.TarantoolNetworkError, OSError, asyncio.TimeoutError)


class AsyncTarantoolConnection:
    """:class:`TarantoolConnection` for asyncio (``asynctnt``): calls from many
    coroutines share one connection, in flight together."""

    def __init__(self, endpoint: TarantoolEndpoint) -> None:
        self.endpoint = endpoint
        self.address = endpoint.address
        self._connection: Any = None
        self._connecting: asyncio.Lock | None = None
        self._installed = False  # by this connection's install, since it connected
        self._install_denied = False

    async def _connect(self) -> Any:
        connection = self._connection
        tried = self._installed or self._install_denied
        if connection is not None and connection.is_connected and tried:
            return connection
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:  # one connect for the calls that wait for it
            if self._connection is None or not self._connection.is_connected:
                if self._connection is not None:
                    await self._connection.disconnect()
                self._connection = asynctnt.Connection(
                    host=self.address.host,
                    port=self.address.port,
                    username=self.address.user,
                    password=self.address.password,
                    fetch_schema=False,
                    auto_refetch_schema=False,
                    connect_timeout=self.endpoint.connect_timeout,
                    request_timeout=self.endpoint.request_timeout,
                    reconnect_timeout=0,  # reconnect on the next call, not in the background
                )
                await self._connection.connect()
            if not self._installed and not self._install_denied:
                try:
                    await self._connection.eval(INSTALL, list(_install_args()))
                except asynctnt.exceptions.TarantoolDatabaseError as exc:
                    if exc.code != _ACCESS_DENIED:
                        raise
                    self._install_denied = True  # a user who may only call it: the one there
                else:
                    self._installed = True
            return self._connection

    async def _send(self, call: TarantoolCall[T], again: bool = False) -> T:
        try:
            reply = await (await self._connect()).call(FUNCTION, list(call.args))
        except asynctnt.exceptions.TarantoolDatabaseError as exc:
            if exc.code != _NO_SUCH_PROC or not self._installed or again:
                raise _database_error(self.address, exc.code, exc.message) from None
            self._installed = False  # the server lost it (a new data folder): once more
            return await self._send(call, again=True)
        return call.parse(reply.body[0])

    async def execute(self, call: TarantoolCall[T]) -> T:
        """Sends one call and parses its reply."""
        try:
            return await self._send(call)
        except _ASYNC_NETWORK as exc:
            raise TarantoolUnreachable(str(self.address), exc) from None

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.disconnect()
        self._connection = None
