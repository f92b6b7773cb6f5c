"""Checks of the arguments the fair queue's calls take, shared by the call builders."""

from __future__ import annotations

from fairque.engine.records import (
    check_identifier,
)
from fairque.errors import (
    InvalidInput,
)


def check_positive(value: float, field: str, maximum: float) -> None:
    if not 0 < value <= maximum:
        raise InvalidInput(field, f"must be above 0 and at most {maximum:g}, got {value!r}")


def check_name(value: str, field: str) -> None:
    try:
        check_identifier(value)
    except ValueError as exc:
        raise InvalidInput(field, str(exc)) from None
