"""Queue contracts: a YAML file declares numbered queues and their fields.

.. code-block:: yaml

    queues:
      - id: 1
        name: emails
        fields:
          to: string
          subject: string
          body: "[]byte"
          tags: "[]int64"

Each queue yields two msgspec types, built when the file is loaded (no generated code
to keep in step with the file): the payload (its fields, stored as a MessagePack array)
and the task a handler receives (``task_id``, ``attempts``, ``prev_start_time``, then the
fields). Decoding checks every field's type.
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import msgspec
import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field

from fairque.errors import InvalidInput
from fairque.storage.models import MAX_QUEUE_NUM, PutTaskRequest, StorageTask

Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]

FIELD_TYPES: dict[str, Any] = {
    "int": int,
    "int64": Int64,
    "string": str,
    "bool": bool,
    "[]byte": bytes,
    "[]int": list[int],
    "[]int64": list[Int64],
}
TASK_FIELDS = ("task_id", "attempts", "prev_start_time")  # what every task carries first


def _check_field_name(name: str) -> str:
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"field name {name!r} must be a Python identifier")
    if name in TASK_FIELDS:
        raise ValueError(f"field name {name!r} is reserved for the task itself")
    return name


class _QueueSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: int = Field(ge=0, le=MAX_QUEUE_NUM)
    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    fields: dict[str, str] = Field(default_factory=dict)

    @pydantic.field_validator("fields")
    @classmethod
    def _check_fields(cls, fields: dict[str, str]) -> dict[str, str]:
        for name, type_name in fields.items():
            _check_field_name(name)
            if type_name not in FIELD_TYPES:
                known = ", ".join(FIELD_TYPES)
                raise ValueError(f"field {name!r}: unknown type {type_name!r} (known: {known})")
        return fields


class _ContractSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    queues: list[_QueueSpec] = Field(min_length=1)

    @pydantic.field_validator("queues")
    @classmethod
    def _check_unique(cls, queues: list[_QueueSpec]) -> list[_QueueSpec]:
        for attribute in ("id", "name"):
            values = [getattr(queue, attribute) for queue in queues]
            repeated = sorted({str(v) for v in values if values.count(v) > 1})
            if repeated:
                raise ValueError(f"queue {attribute} repeated: {', '.join(repeated)}")
        return queues


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


@dataclass(frozen=True)
class QueueContract:
    """One queue of a contract: its number, name and the types of its tasks."""

    id: int
    name: str
    fields: dict[str, str]
    payload_type: type[msgspec.Struct]  # the fields, as stored
    task_type: type[msgspec.Struct]  # task_id, attempts, prev_start_time, then the fields

    @classmethod
    def build(cls, spec: _QueueSpec) -> QueueContract:
        columns = [(name, FIELD_TYPES[type_name]) for name, type_name in spec.fields.items()]
        base = _camel(spec.name)
        payload = msgspec.defstruct(f"{base}Payload", columns, array_like=True, frozen=True)
        task_columns = [("task_id", int), ("attempts", int), ("prev_start_time", datetime | None)]
        task = msgspec.defstruct(f"{base}Task", task_columns + columns, frozen=True)
        return cls(spec.id, spec.name, dict(spec.fields), payload, task)

    def encode(self, fields: Mapping[str, Any]) -> bytes:
        """The stored form of ``fields`` (each checked against its declared type)."""
        where = f"{self.name}.fields"
        if missing := [name for name in self.fields if name not in fields]:
            raise InvalidInput(where, f"missing: {', '.join(missing)}")
        if unknown := sorted(set(fields) - set(self.fields)):
            raise InvalidInput(where, f"not in the contract: {', '.join(unknown)}")
        values = [self._convert(name, fields[name]) for name in self.fields]
        return msgspec.msgpack.encode(self.payload_type(*values))

    def _convert(self, name: str, value: Any) -> Any:
        type_name = self.fields[name]
        if type_name == "[]byte" and not isinstance(value, bytes):  # convert reads base64 str
            raise InvalidInput(f"{self.name}.{name}", f"[]byte: expected bytes, got {value!r}")
        try:
            return msgspec.convert(value, FIELD_TYPES[type_name])
        except msgspec.ValidationError as exc:
            raise InvalidInput(f"{self.name}.{name}", f"{type_name}: {exc}") from None

    def request(
        self,
        fields: Mapping[str, Any],
        *,
        start_time: datetime | None = None,
        delay: timedelta | float | None = None,
    ) -> PutTaskRequest:
        """A :class:`PutTaskRequest` of a task with ``fields`` for this queue."""
        return PutTaskRequest(self.id, self.encode(fields), start_time, delay)

    def decode(self, task: StorageTask) -> Any:
        """The typed task of ``task``; raises msgspec.ValidationError / DecodeError when its
        data does not match the contract."""
        payload = msgspec.msgpack.decode(task.data, type=self.payload_type)
        values = msgspec.structs.astuple(payload)
        return self.task_type(task.id, task.attempts, task.prev_start_time, *values)


class Contract:
    """Every queue of a contract file, by number and by name."""

    def __init__(self, queues: list[QueueContract]) -> None:
        self.queues = {queue.id: queue for queue in queues}
        self._by_name = {queue.name: queue for queue in queues}

    @classmethod
    def from_dict(cls, data: Any) -> Contract:
        try:
            spec = _ContractSpec.model_validate(data)
        except pydantic.ValidationError as exc:
            raise InvalidInput.from_errors(exc.errors()) from None
        return cls([QueueContract.build(queue) for queue in spec.queues])

    @classmethod
    def from_yaml(cls, text: str) -> Contract:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidInput("contract", f"not valid YAML: {exc}") from None
        return cls.from_dict(data)

    @classmethod
    def load(cls, path: str | Path) -> Contract:
        """Reads a contract file."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidInput("contract", f"cannot read {path}: {exc.strerror}") from None
        return cls.from_yaml(text)

    def queue(self, key: int | str) -> QueueContract:
        """The queue with number or name ``key``."""
        found = self.queues.get(key) if isinstance(key, int) else self._by_name.get(key)
        if found is None:
            raise InvalidInput("queue", f"no queue {key!r} in the contract")
        return found
