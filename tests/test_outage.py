"""What counts as an outage: redis-py's leaks of a closed connection become connection
errors; any other error stays what it is."""

from __future__ import annotations

import pytest
from redis.asyncio.connection import Connection
from redis.exceptions import ConnectionError as RedisConnectionError

from fairque.engine.outage import OUTAGE, connection_errors
from fairque.servers.embedded import LocalServer


async def test_a_write_on_a_closed_connection_is_a_connection_error(server: LocalServer) -> None:
    connection = Connection(host="127.0.0.1", port=server.port)
    await connection.connect()  # type: ignore[no-untyped-call]
    await connection.disconnect()  # what another task sharing the client did in CI
    # The line a cluster failover reached (redis-py 8.1): a write on the closed stream.
    with pytest.raises(AttributeError):
        await connection._send_packed_command([b"PING\r\n"])
    expected = pytest.raises(RedisConnectionError, match="connection closed under a command")
    with expected as caught, connection_errors():
        await connection._send_packed_command([b"PING\r\n"])
    assert isinstance(caught.value, OUTAGE)
    assert isinstance(caught.value.__cause__, AttributeError)


def test_errors_of_other_code_are_left_alone() -> None:
    with pytest.raises(AttributeError, match="no_such_name"), connection_errors():
        _ = object().no_such_name  # type: ignore[attr-defined]
    with pytest.raises(TypeError), connection_errors():
        len(5)  # type: ignore[arg-type]
