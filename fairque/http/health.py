"""Liveness and readiness of the HTTP services (the master, the dashboard), for
orchestrators: the paths and answers of the runners' (:mod:`fairque.metrics`), open
without a token, as a probe sends none."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import litestar
from litestar import MediaType, Response
from litestar.handlers import HTTPRouteHandler

from fairque.http.wire import PUBLIC
from fairque.metrics import LIVE_PATH, PROBE_TIMEOUT, READY, READY_PATH, not_ready


def health_routes(ping: Callable[[], Awaitable[object]]) -> list[HTTPRouteHandler]:
    """``GET /livez`` (200 while the app serves) and ``GET /readyz`` (200 while ``ping``
    returns within the probe timeout, else 503 and why), left out of the API document."""

    @litestar.get(LIVE_PATH, opt=PUBLIC, include_in_schema=False, media_type=MediaType.TEXT)
    async def live() -> Response[str]:
        return Response("live\n", media_type=MediaType.TEXT)

    @litestar.get(READY_PATH, opt=PUBLIC, include_in_schema=False, media_type=MediaType.TEXT)
    async def ready() -> Response[str]:
        try:
            await asyncio.wait_for(ping(), PROBE_TIMEOUT)
        except Exception as exc:  # whatever fails, the service cannot serve now
            return Response(not_ready(exc), status_code=503, media_type=MediaType.TEXT)
        return Response(READY, media_type=MediaType.TEXT)

    return [live, ready]
