"""A tenant's shares and a task name's limits, defined once: the field tables
:data:`~fairque.engine.fields.SHARES` and :data:`~fairque.engine.fields.LIMITS`.

From the table come the change model users pass (:data:`SharesChange`, pydantic: the
Python API), the body the Web UI's API takes (:func:`update_body`, msgspec), the
arguments of a change with the bounds ``queue/tenant.lua`` applies (:func:`change_args`:
the script keeps no bounds of its own, it refuses what falls outside those the call
carries), and the reader of a script's shares row (:func:`read_shares`). What a setting
means (who is held, when) is the scripts' (``include/shares.lua``); its name, type,
default and bounds are here only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import msgspec
import pydantic
from pydantic import BaseModel, ConfigDict, Field, ModelWrapValidatorHandler

from fairque.engine.calls import Arg
from fairque.engine.fields import LIMITS, SHARES, ShareField
from fairque.errors import validated


class SharesChangeModel(BaseModel):
    """What every change model has: frozen, no unknown field, strict (``"3"`` is not a
    weight, as over HTTP), and a wrong value raises :class:`~fairque.errors.InvalidInput`
    naming the field."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    def __init__(self, **fields: Any) -> None:
        """The fields are the table's (its model is made from it): checked by pydantic."""
        super().__init__(**fields)

    @pydantic.model_validator(mode="wrap")
    @classmethod
    def _raise_fairque_error(
        cls, data: Any, handler: ModelWrapValidatorHandler[SharesChangeModel]
    ) -> SharesChangeModel:
        return validated(handler, data)

    @pydantic.field_validator("*", mode="before")
    @classmethod
    def _whole(cls, value: Any, info: pydantic.ValidationInfo) -> Any:
        whole = info.field_name is not None and cls.kinds().get(info.field_name) is int
        if whole and (
            isinstance(value, bool) or (isinstance(value, float) and not value.is_integer())
        ):
            raise ValueError(f"must be a whole number, got {value!r}")
        return value

    @classmethod
    def kinds(cls) -> dict[str, type]:
        """Each field's kind (int, float, bool)."""
        return {}

    def given(self) -> dict[str, Any]:
        """The fields given a value (None keeps the stored one)."""
        return {name: value for name, value in self.model_dump().items() if value is not None}


def change_model(
    fields: Sequence[ShareField] = SHARES, name: str = "SharesChange", doc: str = ""
) -> type[SharesChangeModel]:
    """The pydantic model of a change to ``fields`` (each optional: None keeps it)."""
    definitions: dict[str, Any] = {
        field.name: (field.kind | None, Field(default=None, ge=field.low, le=field.high))
        for field in fields
    }
    kinds = {field.name: field.kind for field in fields}
    model = pydantic.create_model(
        name,
        __base__=SharesChangeModel,
        __module__=__name__,
        __doc__=doc or _CHANGE_DOC,
        **definitions,
    )
    model.kinds = classmethod(lambda _cls: kinds)  # type: ignore[method-assign,assignment]
    return model


_CHANGE_DOC = (
    "A change to a tenant's shares (``FairQueue.set_tenant``); None keeps a value.\n\n"
    + ("\n".join(f"``{field.name}``: {field.help}" for field in SHARES))
)

SharesChange = change_model()
LimitsChange = change_model(
    LIMITS,
    "LimitsChange",
    "A change to a task name's limits (``FairQueue.set_limits``); None keeps a value.\n\n"
    + "\n".join(f"``{field.name}``: {field.help}" for field in LIMITS),
)


def update_body(
    fields: Sequence[ShareField] = SHARES, name: str = "SharesUpdate"
) -> type[msgspec.Struct]:
    """The msgspec body of a change to ``fields`` (HTTP): a field left out keeps its value."""
    definitions = [(field.name, _bounded(field) | None, None) for field in fields]
    return msgspec.defstruct(
        name, definitions, forbid_unknown_fields=True, module="fairque.http.ui"
    )


def _bounded(field: ShareField) -> Any:
    """The type of a field's value with its bounds, as msgspec checks them."""
    if field.kind is bool:
        return bool
    return Annotated[field.kind, msgspec.Meta(ge=field.low, le=field.high)]


def change_args(change: Mapping[str, Any], fields: Sequence[ShareField] = SHARES) -> list[Arg]:
    """A change's arguments for ``queue/tenant.lua``'s ``set``: per field, its name, its
    value ('' keeps it) and the bounds the script applies, all as the script keeps them
    (integers: ``value * scale``; a flag 0 or 1, bounds 0 to 1)."""
    args: list[Arg] = [len(fields)]
    for field in fields:
        value = change.get(field.name)
        low, high = (0, 1) if field.kind is bool else (field.low or 0, field.high or 0)
        args += (
            field.name,
            "" if value is None else round(value * field.scale),
            round(low * field.scale),
            round(high * field.scale),
        )
    return args


def read_shares(row: Sequence[Any], fields: Sequence[ShareField] = SHARES) -> dict[str, Any]:
    """The share fields of a script's row (``shares_row`` in ``include/shares.lua``: the
    fields in table order, then where the tenant stands), in users' units."""
    values: dict[str, Any] = {}
    for field, raw in zip(fields, row, strict=False):
        number = int(raw)
        if field.kind is bool:
            values[field.name] = bool(number)
        elif field.scale == 1:
            values[field.name] = field.kind(number)
        else:
            values[field.name] = number / field.scale
    return values
