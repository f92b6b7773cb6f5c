"""A tenant's shares come from one field table (fairque/queue/shares.py): the change
model, the Web UI's body, the script call's bounds and the row reader all follow it."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest

from fairque import FairQueue, InvalidInput
from fairque.engine.calls import Call
from fairque.engine.fields import SHARES, ShareField
from fairque.queue.calls import quotas
from fairque.queue.models import TenantShares
from fairque.queue.shares import (
    SharesChange,
    change_args,
    change_model,
    read_shares,
    update_body,
)

BURST = ShareField("burst", int, 0, 0, 50, help="Tasks a tenant may start at once.")
WITH_BURST = (*SHARES, BURST)


def test_a_new_field_reaches_the_model_the_body_the_call_and_the_reader() -> None:
    model = change_model(WITH_BURST)
    assert model(burst=7).given() == {"burst": 7}
    with pytest.raises(InvalidInput) as raised:
        model(burst=51)
    assert raised.value.field == "burst"
    with pytest.raises(InvalidInput, match="whole number"):
        model(burst=1.5)

    body = update_body(WITH_BURST)
    assert msgspec.json.decode(b'{"burst": 50}', type=body).burst == 50  # type: ignore[attr-defined]
    with pytest.raises(msgspec.ValidationError, match="burst"):
        msgspec.json.decode(b'{"burst": 51}', type=body)

    args = change_args({"burst": 7}, WITH_BURST)
    assert args[0] == len(WITH_BURST)
    assert args[-4:] == ["burst", 7, 0, 50]  # name, value, and the bounds the script applies

    row = [2, 0, 0, 0, 0, 9]  # the table's fields in order, as a script returns them
    assert read_shares(row, WITH_BURST)["burst"] == 9


def test_the_table_is_the_python_api_and_the_read_model() -> None:
    assert set(SharesChange.model_fields) == {field.name for field in SHARES}
    defaults = {field.name: field.default for field in dataclasses.fields(TenantShares)}
    for field in SHARES:
        assert defaults[field.name] == field.default, field.name
    with pytest.raises(InvalidInput) as raised:
        SharesChange(concurrency=1_000_001)
    assert raised.value.field == "concurrency"


def _set_call(queue: FairQueue, tenant: str, args: list[Any]) -> Call[TenantShares]:
    call = quotas.set_tenant(queue.namespace, tenant, SharesChange())
    return dataclasses.replace(call, args=(call.args[0], "set", tenant, *args))


def test_the_script_applies_the_bounds_the_call_carries(queue: FairQueue) -> None:
    # A table whose weight stops at 5: the script refuses 6, though its own code has no
    # bound at all, so no copy of the bounds can disagree with the table.
    narrow = tuple(
        dataclasses.replace(field, high=5) if field.name == "weight" else field for field in SHARES
    )
    with pytest.raises(InvalidInput, match="whole number from 1 to 5, got 6") as raised:
        queue.execute(_set_call(queue, "alice", change_args({"weight": 6}, narrow)))
    assert raised.value.field == "weight"
    assert queue.execute(_set_call(queue, "alice", change_args({"weight": 5}, narrow))).weight == 5


def test_the_script_refuses_a_table_it_does_not_know(queue: FairQueue) -> None:
    # A field the scripts have no meaning for: refused, nothing written.
    with pytest.raises(InvalidInput) as raised:
        queue.execute(_set_call(queue, "alice", change_args({"burst": 3}, WITH_BURST)))
    assert raised.value.field == "shares"
    assert queue.tenant("alice") == TenantShares("alice")
