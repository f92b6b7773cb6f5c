"""What the master and the HTTP worker share on the wire: MessagePack bodies (JSON when
asked for), error bodies naming the field, bearer-token auth, OpenAPI media types.

Request bodies are decoded by their Content-Type (``application/msgpack``, also
``application/x-msgpack`` and ``application/vnd.msgpack``, or ``application/json``);
responses are MessagePack unless the client accepts JSON and not MessagePack. Times go
out as ISO 8601 strings in both encodings (seed 003's ``finished_at``).
"""

from __future__ import annotations

import hmac
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
from litestar import Litestar, Request, Response
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie
from litestar.enums import MediaType
from litestar.exceptions import (
    ClientException,
    HTTPException,
    NotAuthorizedException,
    ValidationException,
)
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import (
    Components,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    Schema,
    SecurityRequirement,
    SecurityScheme,
)
from litestar.types import ControllerRouterHandler, ExceptionHandlersMap, Guard, TypeEncodersMap

from fairque.errors import FairQueueError, InvalidInput, LeaseLost, TaskNotFound

if TYPE_CHECKING:
    from litestar.background_tasks import BackgroundTask, BackgroundTasks
    from litestar.response.base import ASGIResponse

MSGPACK = "application/msgpack"
MSGPACK_TYPES = frozenset({MSGPACK, "application/x-msgpack", "application/vnd.msgpack"})
JSON = MediaType.JSON.value
OPENAPI_PATH = "/schema"  # the document is at /schema/openapi.json
TOKEN_ENV = "FAIRQUE_MASTER_TOKEN"  # noqa: S105 - the variable's name, not a secret

log = logging.getLogger("fairque.http")


class ErrorBody(msgspec.Struct):
    """Every error response: what went wrong and, for bad input, which field."""

    error: str
    message: str
    field: str | None = None


def wants_json(request: Request[Any, Any, Any]) -> bool:
    """True when the client accepts JSON but not MessagePack."""
    accept = request.headers.get("accept", "")
    return JSON in accept and not any(kind in accept for kind in MSGPACK_TYPES)


def encode_body(content: Any, as_json: bool) -> bytes:
    """``content`` as MessagePack or JSON, structs and times as plain values."""
    plain = msgspec.to_builtins(content, builtin_types=(bytes,))  # bytes stay MessagePack bin
    return msgspec.json.encode(plain) if as_json else msgspec.msgpack.encode(plain)


class WireRequest(Request[Any, Any, Any]):
    """A request whose body is decoded according to its Content-Type."""

    async def json(self) -> Any:
        kind = self.headers.get("content-type", "").partition(";")[0].strip().lower()
        body = await self.body()
        try:
            if kind in MSGPACK_TYPES:
                return msgspec.msgpack.decode(body)
            if kind == JSON:
                return msgspec.json.decode(body)
        except msgspec.DecodeError as exc:
            raise ClientException(f"the body is not valid {kind}: {exc}") from None
        raise HTTPException(
            f"send the body as {MSGPACK} or {JSON}, not {kind or 'no content type'}",
            status_code=415,
        )


class WireResponse(Response[Any]):
    """A response encoded as MessagePack, or JSON for a client that asks only for JSON."""

    def to_asgi_response(
        self,
        app: Litestar | None,
        request: Request[Any, Any, Any],
        *,
        background: BackgroundTask | BackgroundTasks | None = None,
        cookies: Iterable[Cookie] | None = None,
        encoded_headers: Iterable[tuple[bytes, bytes]] | None = None,
        headers: dict[str, str] | None = None,
        is_head_response: bool = False,
        media_type: MediaType | str | None = None,
        status_code: int | None = None,
        type_encoders: TypeEncodersMap | None = None,
    ) -> ASGIResponse:
        if self.content is None and (status_code or self.status_code) == 204:
            self.content = b""
        self.media_type = JSON if wants_json(request) else MSGPACK
        return super().to_asgi_response(
            app,
            request,
            background=background,
            cookies=cookies,
            encoded_headers=encoded_headers,
            headers=headers,
            is_head_response=is_head_response,
            media_type=self.media_type,
            status_code=status_code,
            type_encoders=type_encoders,
        )

    def render(self, content: Any, media_type: str, enc_hook: Any = None) -> bytes:
        if isinstance(content, bytes):
            return content
        return encode_body(content, media_type == JSON)


def error_response(
    request: Request[Any, Any, Any], status: int, error: str, message: str, field: str | None = None
) -> Response[Any]:
    body = encode_body(ErrorBody(error, message, field), wants_json(request))
    return Response(body, status_code=status, media_type=JSON if wants_json(request) else MSGPACK)


_BACKTICKED = re.compile(r"field `([^`]+)`")
_AT = re.compile(r" - at `\$\.?([^`]*)`$")


def _field_of(exc: ValidationException) -> str | None:
    """Where msgspec found the problem, from the error Litestar wraps: ``priority``,
    ``[1].priority`` in a list, or the missing / unknown field a body-level error names."""
    cause = str(exc.__cause__ or "")
    found = _AT.search(cause)
    path = found.group(1).removeprefix("data").lstrip(".") if found else ""
    named = _BACKTICKED.search(cause)
    if named:
        path = f"{path}.{named.group(1)}" if path else named.group(1)
    return path or None


def _on_validation(request: Request[Any, Any, Any], exc: ValidationException) -> Response[Any]:
    problems = [
        p for p in (exc.extra if isinstance(exc.extra, list) else []) if isinstance(p, Mapping)
    ]
    message = "; ".join(str(p.get("message", "")) for p in problems)
    field = _field_of(exc) or (str(problems[0].get("key", "body")) if problems else "body")
    return error_response(request, 400, "invalid_input", message or str(exc.detail), field)


def _on_http(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    kind = "unauthorized" if exc.status_code == 401 else "http_error"
    return error_response(request, exc.status_code, kind, str(exc.detail))


def _on_fairque(request: Request[Any, Any, Any], exc: FairQueueError) -> Response[Any]:
    if isinstance(exc, InvalidInput):
        return error_response(request, 400, "invalid_input", exc.message, exc.field)
    if isinstance(exc, TaskNotFound):
        return error_response(request, 404, "not_found", str(exc))
    if isinstance(exc, LeaseLost):
        return error_response(request, 409, "lease_lost", str(exc))
    log.error("request failed: %s", exc)
    return error_response(request, 500, "server_error", "the request failed")


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    ValidationException: _on_validation,
    HTTPException: _on_http,
    FairQueueError: _on_fairque,
}


def bearer_guard(token: str) -> Guard:
    """A guard that admits only requests bearing ``token``."""
    expected = f"Bearer {token}".encode()

    def guard(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
        if handler.opt.get("public"):  # the Web UI's page and files: its login form
            return
        given = connection.headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, expected):
            raise NotAuthorizedException("a valid bearer token is required")

    return guard


BEARER_COMPONENTS = Components(
    security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer")}
)
BEARER: list[SecurityRequirement] = [{"bearer": []}]


_ERROR_SCHEMA = Schema(
    type=OpenAPIType.OBJECT,
    properties={
        "error": Schema(type=OpenAPIType.STRING),
        "message": Schema(type=OpenAPIType.STRING),
        "field": Schema(one_of=[Schema(type=OpenAPIType.STRING), Schema(type=OpenAPIType.NULL)]),
    },
    required=["error", "message"],
    description="What went wrong and, for bad input, which field.",
)
_ERROR = OpenAPIResponse(
    description="Bad input, unknown job, or a body that is not MessagePack / JSON",
    content={kind: OpenAPIMediaType(schema=_ERROR_SCHEMA) for kind in (MSGPACK, JSON)},
)


@dataclass
class WireOperation(Operation):
    """An OpenAPI operation whose MessagePack bodies are also offered as JSON, and whose
    errors are :class:`ErrorBody`."""

    def __post_init__(self) -> None:
        if self.responses is not None:
            self.responses.pop("400", None)
            self.responses["4XX"] = _ERROR
        bodies = [self.request_body.content] if self.request_body else []  # type: ignore[union-attr]
        bodies += [r.content for r in (self.responses or {}).values() if r.content]  # type: ignore[union-attr]
        for content in bodies:
            media = content.get(MSGPACK)
            if isinstance(media, OpenAPIMediaType):
                content[JSON] = media


def create_app(
    title: str,
    description: str | None,
    token: str | None,
    route_handlers: Sequence[ControllerRouterHandler],
    lifespan: Sequence[Any],
    **options: Any,
) -> Litestar:
    """A Litestar app speaking this wire: body codecs, error bodies, the bearer guard when
    ``token`` is set, and the OpenAPI document at ``/schema/openapi.json``."""
    return Litestar(
        route_handlers=route_handlers,
        request_class=WireRequest,
        response_class=WireResponse,
        exception_handlers=EXCEPTION_HANDLERS,
        guards=[bearer_guard(token)] if token else [],
        lifespan=lifespan,
        openapi_config=OpenAPIConfig(
            title=title,
            version="1",
            description=description,
            path=OPENAPI_PATH,
            components=BEARER_COMPONENTS,
            security=BEARER,
        ),
        debug=False,
        logging_config=None,  # the process owner configures logging (no httpx INFO noise)
        **options,
    )
