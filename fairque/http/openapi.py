"""The OpenAPI documents of the master and of the HTTP worker.

Litestar writes the paths, parameters and responses from the routes. The schemas of the
bodies are msgspec's, made from the very types that decode them (strictly, see
:class:`~fairque.http.wire.WireRequest`), so the document states what the decoder
enforces: unknown fields refused, the constraints of list items and of optional numbers
(which Litestar's translation of the same types drops). What a type checks beyond its
fields, in ``__post_init__``, it adds to msgspec's schema in its ``json_schema``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec
from litestar import Litestar, Request
from litestar.enums import MediaType
from litestar.openapi.plugins import JsonRenderPlugin

from fairque.http.wire import ErrorBody

REF = "#/components/schemas/{name}"


class Document:
    """How an app's OpenAPI document is finished: msgspec's schemas for ``types``, more
    ``schemas`` (name -> JSON Schema), and ``webhooks`` (the app whose routes are the
    requests this service sends: OpenAPI 3.1 webhooks named by their paths, ``/run`` as
    ``run``, with their schemas)."""

    def __init__(
        self,
        types: Sequence[type],
        schemas: Mapping[str, Any] | None = None,
        webhooks: Callable[[], Litestar] | None = None,
    ) -> None:
        self.types: tuple[type, ...] = (*types, ErrorBody)  # every error answer is one
        self.schemas = dict(schemas or {})  # more components, written by hand
        self.webhooks = webhooks

    def finish(self, generated: Mapping[str, Any]) -> dict[str, Any]:
        """``generated`` (Litestar's document) with the schemas and webhooks added."""
        document = copy.deepcopy(dict(generated))
        schemas: dict[str, Any] = document.setdefault("components", {}).setdefault("schemas", {})
        _, components = msgspec.json.schema_components(self.types, ref_template=REF)
        for name, kind in _named_types(self.types).items():
            finish = getattr(kind, "json_schema", None)
            if finish is not None and name in components:
                components[name] = finish(components[name])
        schemas.update(components)
        schemas.update(copy.deepcopy(self.schemas))
        for schema in schemas.values():
            _defaults_in_words(schema)
        if self.webhooks is not None:
            other = openapi_document(self.webhooks())
            for path, item in other["paths"].items():
                document.setdefault("webhooks", {})[path.strip("/")] = item
            for key, schema in other.get("components", {}).get("schemas", {}).items():
                schemas.setdefault(key, schema)
        document["components"]["schemas"] = dict(sorted(schemas.items()))
        _sort_headers(document)
        return document

    def json_plugin(self) -> JsonRenderPlugin:
        """Serves the finished document at ``openapi.json``, as ``application/json``."""
        return _FinishedJson(self)


def _defaults_in_words(schema: dict[str, Any]) -> None:
    """Moves the ``default`` of each property of ``schema`` (and of its variants) into the
    property's description. openapi-typescript types a property with a default as always
    present (openapi-ts/openapi-typescript#2489), so a request body that leaves it out,
    as the server allows, would not type-check."""
    for variant in [schema, *schema.get("anyOf", ()), *schema.get("oneOf", ())]:
        for prop in variant.get("properties", {}).values():
            if "default" in prop:
                default = msgspec.json.encode(prop.pop("default")).decode()
                said = prop.get("description", "").rstrip()
                prop["description"] = f"{said} Default: `{default}`.".lstrip()


def _sort_headers(document: dict[str, Any]) -> None:
    """Each response's headers by name: Litestar keeps them in a set's order, which
    changes from run to run, and ``fairque master --openapi`` writes the same bytes each
    time."""
    for item in [*document.get("paths", {}).values(), *document.get("webhooks", {}).values()]:
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for response in operation.get("responses", {}).values():
                if isinstance(response, dict) and "headers" in response:
                    response["headers"] = dict(sorted(response["headers"].items()))


def _named_types(types: Sequence[type]) -> dict[str, type]:
    """Every struct or dataclass in ``types`` and in their fields, by name (the names
    msgspec gives their components)."""
    found: dict[str, type] = {}
    pending: list[Any] = list(msgspec.inspect.multi_type_info(types))
    while pending:
        info = pending.pop()
        if isinstance(info, (msgspec.inspect.StructType, msgspec.inspect.DataclassType)):
            if info.cls.__name__ not in found:
                found[info.cls.__name__] = info.cls
                pending.extend(field.type for field in info.fields)
            continue
        inner = ("item_type", "key_type", "value_type")
        pending.extend(getattr(info, name) for name in inner if hasattr(info, name))
        pending.extend(getattr(info, "types", ()))  # unions, tuples
    return found


class _FinishedJson(JsonRenderPlugin):
    def __init__(self, document: Document) -> None:
        super().__init__(path="/openapi.json", media_type=MediaType.JSON)
        self.document = document
        self.rendered: bytes | None = None

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        if self.rendered is None:  # the routes do not change once the app is built
            self.rendered = msgspec.json.encode(self.document.finish(openapi_schema))
        return self.rendered


def openapi_document(app: Litestar) -> dict[str, Any]:
    """The OpenAPI document ``app`` serves (built by ``app.create_app``)."""
    document: Document = app.state["document"]
    return document.finish(app.openapi_schema.to_schema())
