"""The master's API fuzzed from its own OpenAPI document: no input gets a 5xx."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.openapi import from_asgi

from fairque.engine.embedded import LocalServer
from fairque.http.master import MasterConfig, create_master

OPERATIONS = [
    (path, method.upper())
    for path, item in create_master().openapi_schema.to_schema()["paths"].items()
    for method in item
]


@schemathesis.serializer("application/msgpack")
def to_msgpack(_ctx: Any, value: Any) -> bytes:
    try:
        return msgspec.msgpack.encode(value)
    except OverflowError:  # an int MessagePack cannot hold: send it anyway, as JSON bytes
        return msgspec.json.encode(value)


@schemathesis.deserializer("application/msgpack")
def from_msgpack(_ctx: Any, response: Any) -> Any:
    return msgspec.msgpack.decode(response.content)


@pytest.mark.parametrize(("path", "method"), OPERATIONS)
def test_no_input_gets_a_server_error(
    request: pytest.FixtureRequest, server: LocalServer, namespace: str, path: str, method: str
) -> None:
    if request.node.callspec.params["server"] != "valkey":
        pytest.skip("the HTTP layer is the same on every engine; fuzzed once")
    app = create_master(MasterConfig(url=server.url, namespace=namespace, poll=0.05))
    operation = from_asgi("/schema/openapi.json", app)[path][method]

    @given(case=operation.as_strategy())
    @settings(
        max_examples=10, deadline=None, database=None, derandomize=True,
        suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate],
    )  # fmt: skip
    def check(case: Any) -> None:
        response = case.call()
        assert response.status_code < 500, response.content

    check()
