"""The apps that speak fairque's wire: :func:`create_app` puts the body codecs, the error
bodies, the bearer guard (:mod:`fairque.http.wire`) and the OpenAPI document
(:mod:`fairque.http.openapi`) together for the JQ master and the HTTP worker."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from litestar import Litestar
from litestar.datastructures import State
from litestar.handlers import HTTPRouteHandler
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import RedocRenderPlugin
from litestar.types import ControllerRouterHandler, Message, Method, Scope

from fairque.engine.outage import OutageLog
from fairque.http.openapi import Document
from fairque.http.wire import (
    BEARER,
    BEARER_COMPONENTS,
    EXCEPTION_HANDLERS,
    OPENAPI_PATH,
    WireRequest,
    WireResponse,
    bearer_guard,
)


def _operation_id(handler: HTTPRouteHandler, _method: Method, _path: list[Any]) -> str:
    """A handler's operation id: its function's name in camelCase (``jobDetail``), with
    ``ui`` before the Web UI's (whose names may be the API's: ``uiOverview``). A generated
    client names its functions by them."""
    first, *rest = handler.handler_name.split("_")
    name = first + "".join(word.title() for word in rest)
    return "ui" + name[0].upper() + name[1:] if "Web UI" in (handler.tags or ()) else name


async def _allow_every_method(message: Message, scope: Scope) -> None:
    """Litestar answers OPTIONS with the methods of one handler of the path only (PUT
    without DELETE): list them all, as its 405 answers do. A coroutine function, as every
    hook here: Litestar runs a plain function hook in its thread pool, and this one runs
    for every message of every response."""
    if message["type"] != "http.response.start" or scope.get("method") != "OPTIONS":
        return
    handler = scope.get("route_handler")
    routes = scope["app"].route_handler_method_map
    methods = {m for path in getattr(handler, "paths", ()) for m in routes.get(path, ())}
    if methods:
        headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != b"allow"]
        message["headers"] = [*headers, (b"allow", ", ".join(sorted(methods)).encode())]


def create_app(
    title: str,
    description: str | None,
    token: str | None,
    route_handlers: Sequence[ControllerRouterHandler],
    lifespan: Sequence[Any],
    *,
    document: Document,
    outage: OutageLog | None = None,
    **options: Any,
) -> Litestar:
    """A Litestar app speaking this wire: body codecs, error bodies (503 while the queue's
    server is away, logged once per outage by ``outage``), the bearer guard when ``token``
    is set, and the OpenAPI ``document`` at ``/schema/openapi.json`` (JSON) and
    ``/schema`` (an HTML page). Bearer auth is declared only when it is required."""
    auth = {"components": BEARER_COMPONENTS, "security": BEARER} if token else {}
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
            render_plugins=[document.json_plugin(), RedocRenderPlugin(path="/")],
            operation_id_creator=_operation_id,
            **auth,  # type: ignore[arg-type]
        ),
        state=State({"outage": outage, "document": document}),
        before_send=[_allow_every_method],
        debug=False,
        logging_config=None,  # the process owner configures logging (no httpx INFO noise)
        **options,
    )
