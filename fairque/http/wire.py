"""What the master and the HTTP worker share on the wire: MessagePack bodies (JSON when
asked for), error bodies naming the field, bearer-token auth, OpenAPI media types.

Request bodies are decoded by their Content-Type (``application/msgpack``, also
``application/x-msgpack`` and ``application/vnd.msgpack``, or ``application/json``);
responses are in the type ``Accept`` prefers, else in the request body's type, else JSON
(:func:`wants_json`). Times go
out as ISO 8601 strings in both encodings (the result's ``finished_at``).
"""

from __future__ import annotations

import hmac
import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec
from litestar import Litestar, Request, Response
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie
from litestar.enums import MediaType
from litestar.exceptions import (
    HTTPException,
    NotAuthorizedException,
    ValidationException,
)
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi.spec import (
    Components,
    OpenAPIMediaType,
    OpenAPIResponse,
    Operation,
    Reference,
    SecurityRequirement,
    SecurityScheme,
)
from litestar.types import (
    ExceptionHandlersMap,
    Guard,
    TypeEncodersMap,
)

from fairque.engine.outage import SERVER_AWAY, OutageLog
from fairque.errors import (
    FairQueueError,
    InvalidInput,
    LeaseLost,
    ServerUnavailable,
    TaskNotFound,
)
from fairque.jobs.models import invalid

if TYPE_CHECKING:
    from litestar.background_tasks import BackgroundTask, BackgroundTasks
    from litestar.response.base import ASGIResponse


MSGPACK = "application/msgpack"
FRAMES = "application/vnd.fairque.result-frames"  # a worker's streamed /runs answer
MSGPACK_TYPES = frozenset({MSGPACK, "application/x-msgpack", "application/vnd.msgpack"})
JSON = MediaType.JSON.value
OPENAPI_PATH = "/schema"  # the document is at /schema/openapi.json
TOKEN_ENV = "FAIRQUE_MASTER_TOKEN"  # noqa: S105 - the variable's name, not a secret

log = logging.getLogger("fairque.http")

# How bodies are typed, for the OpenAPI documents (docs/http.md says the same).
MEDIA_TYPES = f"""**Media types.** A request body is JSON (`{JSON}`) or MessagePack
(`{MSGPACK}`; `application/x-msgpack` and `application/vnd.msgpack` are read too), as its
`Content-Type` says. An answer is in the type `Accept` prefers when it names either (the
higher `q` wins; MessagePack on a tie); otherwise (no `Accept`, or `*/*`) in the type of
the request's body, and JSON for a request without one. A client generated from this
document, which sends JSON and no `Accept`, is answered in JSON; MessagePack is the fast
path for clients that ask for it. Times are ISO 8601 strings; MessagePack binary is
base64 in JSON answers. Every error is an `ErrorBody`."""


class ErrorBody(msgspec.Struct):
    """Every error response: what went wrong and, for bad input, which field."""

    error: str
    message: str
    field: str | None = None


def _accepted(accept: str) -> dict[str, float]:
    """The media ranges of an ``Accept`` header by their quality (``q``, 1 when not given)."""
    ranges: dict[str, float] = {}
    for item in accept.split(","):
        kind, *parameters = (part.strip() for part in item.split(";"))
        quality = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = min(max(float(value), 0.0), 1.0)
                except ValueError:
                    quality = 0.0  # a malformed weight: not a type the client asked for
        if kind:
            kind = kind.lower()
            ranges[kind] = max(quality, ranges.get(kind, 0.0))
    return ranges


def wants_json(request: Request[Any, Any, Any]) -> bool:
    """Whether the answer is JSON rather than MessagePack. ``Accept`` decides when it names
    either type (the higher ``q`` wins; MessagePack, the fast path, on a tie). Otherwise (no
    ``Accept``, ``*/*``, or types of neither) the answer is in the request body's type,
    and JSON for a request without a MessagePack body: what a client generated from the
    OpenAPI document, which sends JSON and no ``Accept``, reads. (:data:`FRAMES`, a
    worker's streamed MessagePack answer, counts as MessagePack.)"""
    ranges = _accepted(request.headers.get("accept", ""))
    json_quality = ranges.get(JSON)
    msgpack_types = (*MSGPACK_TYPES, FRAMES)
    msgpack_quality = max((ranges[kind] for kind in msgpack_types if kind in ranges), default=None)
    if json_quality is None and msgpack_quality is None:
        return request_media_type(request) not in MSGPACK_TYPES
    return (json_quality or 0.0) > (msgpack_quality or 0.0)


def request_media_type(request: Request[Any, Any, Any]) -> str:
    """The request body's media type, lowercased, without parameters ("" without one)."""
    return request.headers.get("content-type", "").partition(";")[0].strip().lower()


def encode_body(content: Any, as_json: bool) -> bytes:
    """``content`` as MessagePack or JSON, structs and times as plain values."""
    plain = msgspec.to_builtins(content, builtin_types=(bytes,))  # bytes stay MessagePack bin
    return msgspec.json.encode(plain) if as_json else msgspec.msgpack.encode(plain)


def _json_number(text: str) -> int | float:
    """A JSON number with no fraction is an integer, as JSON Schema reads it (JSON has one
    number type): ``3.0`` is the integer 3. One beyond the 64 bits of a MessagePack
    integer (``1e300``, a large JavaScript number) stays a float, as JSON readers in other
    languages keep it. In MessagePack, where a float is a type of its own, it stays a
    float, and an integer field refuses it."""
    value = float(text)
    if value.is_integer() and -(2**63) <= value < 2**64:
        return int(value)
    return value


_json_decoder = msgspec.json.Decoder(float_hook=_json_number)
_msgpack_decoders: dict[Any, msgspec.msgpack.Decoder[Any]] = {}


def decode_body(body: bytes, kind: str, target: Any) -> Any:
    """``body``, of media type ``kind`` (MessagePack or JSON), decoded strictly into
    ``target``. Raises msgspec's DecodeError / ValidationError, UnicodeDecodeError,
    RecursionError, or ValueError for a media type that is neither."""
    if kind in MSGPACK_TYPES:
        decoder = _msgpack_decoders.get(target)
        if decoder is None:
            decoder = _msgpack_decoders[target] = msgspec.msgpack.Decoder(target)
        return decoder.decode(body)
    if kind == JSON:  # read as plain values first, for their numbers' sake
        return msgspec.convert(_json_decoder.decode(body), target)
    raise ValueError(f"a body of type {kind or 'none'}, not {MSGPACK} or {JSON}")


class WireRequest(Request[Any, Any, Any]):
    """A request whose body is decoded according to its Content-Type, straight into the
    type its handler declares for ``data``.

    msgspec decodes strictly: ``"7"`` is not an integer, nor is a MessagePack float
    ``3.0``, and ``"true"`` is not a boolean, as the OpenAPI document says. (Litestar's
    own conversion of a decoded body is lax; it receives the typed value and keeps it.)"""

    async def json(self) -> Any:
        kind = request_media_type(self)
        if kind not in MSGPACK_TYPES and kind != JSON:
            raise HTTPException(
                f"send the body as {MSGPACK} or {JSON}, not {kind or 'no content type'}",
                status_code=415,
            )
        body = await self.body()
        field = self.route_handler.parsed_data_field
        target: Any = Any if field is None else field.annotation
        try:
            return decode_body(body, kind, target)
        except msgspec.ValidationError as exc:
            raise invalid(exc) from None
        except msgspec.DecodeError as exc:
            raise InvalidInput("body", f"is not valid {kind}: {exc}") from None
        except UnicodeDecodeError as exc:  # msgspec reads MessagePack str as UTF-8
            raise InvalidInput("body", f"holds a string that is not UTF-8: {exc}") from None
        except RecursionError:  # far deeper than MAX_DEPTH, which the ops refuse anyway
            raise InvalidInput("body", "is nested too deeply to read") from None


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
        if self.media_type == MSGPACK:  # not the OpenAPI document or its page
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
    request: Request[Any, Any, Any],
    status: int,
    error: str,
    message: str,
    field: str | None = None,
    *,
    headers: Mapping[str, str] | None = None,
) -> Response[Any]:
    """An :class:`ErrorBody` in the encoding the client reads, labelled as such."""
    as_json = wants_json(request)
    body = encode_body(ErrorBody(error, message, field), as_json)
    media_type = JSON if as_json else MSGPACK
    return Response(body, status_code=status, media_type=media_type, headers=dict(headers or {}))


_BACKTICKED = re.compile(r"field `([^`]+)`")
_AT = re.compile(r" - at `\$\.?([^`]*)`$")


def _field_of(exc: ValidationException) -> str | None:
    """Where msgspec found the problem, from the error Litestar wraps (a query or path
    parameter): the parameter, or the missing / unknown field an error names."""
    cause = str(exc.__cause__ or "")
    found = _AT.search(cause)
    path = found.group(1).removeprefix("data").lstrip(".") if found else ""
    named = _BACKTICKED.search(cause)
    if named:
        path = f"{path}.{named.group(1)}" if path else named.group(1)
    return path or None


def _wire_name(request: Request[Any, Any, Any], field: str) -> str:
    """A parameter as the client names it: ``state`` for the handler's ``task_state``."""
    parameter = request.route_handler.parsed_fn_signature.parameters.get(field)
    kwarg = getattr(parameter, "kwarg_definition", None)
    alias = getattr(kwarg, "name", None) or getattr(kwarg, "query", None)
    return str(alias) if alias else field


def _on_validation(request: Request[Any, Any, Any], exc: ValidationException) -> Response[Any]:
    problems = [
        p for p in (exc.extra if isinstance(exc.extra, list) else []) if isinstance(p, Mapping)
    ]
    message = "; ".join(str(p.get("message", "")) for p in problems)
    field = _field_of(exc) or (str(problems[0].get("key", "body")) if problems else "body")
    if field == "data":  # Litestar's name for the body (a batch of the wrong length)
        field = "body"
    field = _wire_name(request, field)
    return error_response(request, 400, "invalid_input", message or str(exc.detail), field)


def _on_http(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    if exc.status_code >= 500:
        return _on_unexpected(request, exc)
    kind = {401: "unauthorized", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    headers = dict(exc.headers or {})  # e.g. 405's Allow
    if exc.status_code == 401:
        headers.setdefault("www-authenticate", "Bearer")
    return error_response(request, exc.status_code, kind, str(exc.detail), headers=headers)


def _on_fairque(request: Request[Any, Any, Any], exc: FairQueueError) -> Response[Any]:
    if isinstance(exc, InvalidInput):
        return error_response(request, 400, "invalid_input", exc.message, exc.field)
    if isinstance(exc, TaskNotFound):
        return error_response(request, 404, "not_found", str(exc))
    if isinstance(exc, LeaseLost):
        return error_response(request, 409, "lease_lost", str(exc))
    return _on_unexpected(request, exc)


RETRY_AFTER = "1"  # seconds a client waits before asking again while the server is away


def _on_server_away(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """503: the queue's server is unreachable. Logged once per outage (the app's
    :class:`OutageLog`), not once per request."""
    outage = request.app.state.get("outage")
    if isinstance(outage, OutageLog):
        outage.failed(exc)
        server = f" ({outage.server})"
    else:
        log.error("the server is unreachable: %s: %s", type(exc).__name__, exc)
        server = ""
    message = f"the queue's server{server} is unreachable; try again shortly"
    return error_response(
        request, 503, "unavailable", message, headers={"retry-after": RETRY_AFTER}
    )


def _on_unexpected(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """500, logged with the request and the traceback under a reference the body gives,
    so that an operator can find the line a client reports."""
    reference = os.urandom(6).hex()
    log.error(
        "%s %s failed (ref %s): %s: %s",
        request.method, request.url.path, reference, type(exc).__name__, exc,
        exc_info=exc,
    )  # fmt: skip
    message = f"the request failed on the server; its log has the details (ref {reference})"
    return error_response(request, 500, "server_error", message)


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    ValidationException: _on_validation,
    HTTPException: _on_http,
    FairQueueError: _on_fairque,
    **dict.fromkeys((ServerUnavailable, *SERVER_AWAY), _on_server_away),
    Exception: _on_unexpected,
}


PUBLIC = {"public": True}  # a route the bearer guard lets through (a login page, a probe)


def bearer_guard(token: str) -> Guard:
    """A guard that admits only requests bearing ``token``. It is a coroutine function:
    Litestar runs a plain function guard in its thread pool, two thread hops per request."""
    expected = f"Bearer {token}".encode()

    async def guard(
        connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
    ) -> None:
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


# Defined once, by msgspec, in the document's components (see fairque.http.openapi).
_ERROR_SCHEMA = Reference(ref="#/components/schemas/ErrorBody")
_ERROR = OpenAPIResponse(
    description="Bad input, unknown job, or a body that is not MessagePack / JSON",
    content={kind: OpenAPIMediaType(schema=_ERROR_SCHEMA) for kind in (MSGPACK, JSON)},
)
_SERVER_ERROR = OpenAPIResponse(
    description="503: the queue's server is unreachable (try again); 500: the request "
    "failed, and the server logged why under the reference the message gives",
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
            self.responses["5XX"] = _SERVER_ERROR
        bodies = [self.request_body.content] if self.request_body else []  # type: ignore[union-attr]
        bodies += [r.content for r in (self.responses or {}).values() if r.content]  # type: ignore[union-attr]
        for content in bodies:
            media = content.get(MSGPACK)
            if isinstance(media, OpenAPIMediaType):
                content[JSON] = media
