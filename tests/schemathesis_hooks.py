"""schemathesis hooks for the fuzz test (``SCHEMATHESIS_HOOKS=tests.schemathesis_hooks``):
MessagePack bodies, written and read as the master's clients do."""

from __future__ import annotations

from typing import Any

import msgspec
import schemathesis


def _integers(value: Any) -> Any:
    """The generated value with JSON Schema's integers as integers: ``3.0`` is an integer
    to JSON Schema, which has one number type, so it goes out as a MessagePack int (where
    an integer field refuses a float). One too large for 64 bits (``1e300``) stays a
    float, as the master reads it in JSON."""
    if isinstance(value, float) and value.is_integer() and -(2**63) <= value < 2**64:
        return int(value)
    if isinstance(value, list):
        return [_integers(item) for item in value]
    if isinstance(value, dict):
        return {key: _integers(item) for key, item in value.items()}
    return value


@schemathesis.serializer("application/msgpack")
def to_msgpack(_ctx: Any, value: Any) -> bytes:
    try:
        return msgspec.msgpack.encode(_integers(value))
    except OverflowError:  # an int MessagePack cannot hold: send it anyway, as JSON bytes
        return msgspec.json.encode(value)


@schemathesis.deserializer("application/msgpack")
def from_msgpack(_ctx: Any, response: Any) -> Any:
    return msgspec.msgpack.decode(response.content)
