"""Queue contracts: valid and invalid YAML, typed models, MessagePack round trips."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import msgspec
import pytest

from fairque.errors import InvalidInput
from fairque.storage import StorageTask
from fairque.storage.contract import Contract

CONTRACT = """
queues:
  - id: 1
    name: emails
    fields:
      to: string
      subject: string
      body: "[]byte"
  - id: 7
    name: all_types
    fields:
      a: int
      b: int64
      c: string
      d: bool
      e: "[]byte"
      f: "[]int"
      g: "[]int64"
  - id: 8
    name: empty
"""

NOW = datetime(2026, 1, 2, tzinfo=timezone.utc)


def stored(queue_num: int, data: bytes, attempts: int = 0) -> StorageTask:
    return StorageTask(11, queue_num, data, attempts, NOW, NOW, NOW if attempts else None)


def test_queues_by_number_and_name(tmp_path: Path) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(CONTRACT)
    contract = Contract.load(path)
    emails = contract.queue("emails")
    assert contract.queue(1) is emails
    assert sorted(contract.queues) == [1, 7, 8]
    assert emails.task_type.__name__ == "EmailsTask"
    assert emails.task_type.__struct_fields__ == (
        "task_id", "attempts", "prev_start_time", "to", "subject", "body",
    )  # fmt: skip


def test_every_field_type_round_trips() -> None:
    queue = Contract.from_yaml(CONTRACT).queue("all_types")
    fields = {"a": -3, "b": 2**62, "c": "é", "d": True, "e": b"\x00", "f": [1], "g": [-(2**63)]}
    task = queue.decode(stored(7, queue.encode(fields), attempts=2))
    assert (task.task_id, task.attempts, task.prev_start_time) == (11, 2, NOW)
    assert msgspec.structs.asdict(task) == {
        "task_id": 11, "attempts": 2, "prev_start_time": NOW, **fields,
    }  # fmt: skip
    request = queue.request(fields, delay=5)
    assert (request.queue_num, request.delay) == (7, 5)
    assert Contract.from_yaml(CONTRACT).queue("empty").encode({}) == b"\x90"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"to": "a", "subject": "s"}, "emails.fields"),
        ({"to": "a", "subject": "s", "body": b"", "cc": "x"}, "emails.fields"),
        ({"to": 1, "subject": "s", "body": b""}, "emails.to"),
        ({"to": "a", "subject": "s", "body": "text"}, "emails.body"),
    ],
)
def test_encode_refuses_fields_off_the_contract(fields: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        Contract.from_yaml(CONTRACT).queue("emails").encode(fields)
    assert caught.value.field == field


def test_int64_fields_are_range_checked() -> None:
    queue = Contract.from_yaml(CONTRACT).queue("all_types")
    fields = {"a": 1, "b": 2**63, "c": "", "d": False, "e": b"", "f": [], "g": []}
    with pytest.raises(InvalidInput) as caught:
        queue.encode(fields)
    assert caught.value.field == "all_types.b"


def test_decode_checks_types() -> None:
    emails = Contract.from_yaml(CONTRACT).queue("emails")
    with pytest.raises(msgspec.ValidationError):
        emails.decode(stored(1, msgspec.msgpack.encode(["to", 5, b""])))
    with pytest.raises(msgspec.DecodeError):
        emails.decode(stored(1, b"\xc1"))


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("queues: []", "queues", "at least 1"),
        ("{}", "queues", "required"),
        ("queues:\n  - {id: 1, name: a}\n  - {id: 1, name: b}", "queues", "id repeated: 1"),
        ("queues:\n  - {id: 1, name: a}\n  - {id: 2, name: a}", "queues", "name repeated: a"),
        ("queues:\n  - {id: -1, name: a}", "queues.0.id", "greater than or equal"),
        ("queues:\n  - {id: 1, name: Emails}", "queues.0.name", "pattern"),
        ("queues:\n  - {id: 1, name: a, fields: {x: float}}", "queues.0.fields", "unknown type"),
        ("queues:\n  - {id: 1, name: a, fields: {attempts: int}}", "queues.0.fields", "reserved"),
        ("queues:\n  - {id: 1, name: a, fields: {'1x': int}}", "queues.0.fields", "identifier"),
        ("queues:\n  - {id: 1, name: a, extra: 1}", "queues.0.extra", "not permitted"),
        ("queues: [", "contract", "not valid YAML"),
    ],
)
def test_invalid_contracts_name_what_is_wrong(text: str, field: str, words: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        Contract.from_yaml(text)
    assert caught.value.field == field
    assert words in str(caught.value)


def test_missing_file_and_unknown_queue(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read"):
        Contract.load(tmp_path / "absent.yaml")
    with pytest.raises(InvalidInput, match="no queue 'sms'"):
        Contract.from_yaml(CONTRACT).queue("sms")
