"""The JQ master's Prometheus metrics at ``GET /metrics``: the HTTP requests it answered
by route, method and status, their latency, its jobs by state and its HTTP workers.

The jobs are counted once per scrape, with the one stats call the Web UI's overview
makes; a request adds no server call, only two in-memory updates. The endpoint asks for
the master's token as its API does; the probes (``/livez``, ``/readyz``) stay open.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping

import litestar
from litestar import Response
from litestar.enums import ScopeType
from litestar.handlers import HTTPRouteHandler
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest

from fairque.engine.outage import OUTAGE, OutageLog

METRICS_PATH = "/metrics"

StateCounts = Callable[[], Awaitable[Mapping[str, int]]]  # jobs per state, from the server


class JobStates:
    """``fairque_master_jobs{namespace, state}``: the counts the scrape read just before
    rendering (none while the server is away: the request metrics still serve)."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.counts: Mapping[str, int] | None = None

    def collect(self) -> Iterable[Metric]:
        if self.counts is None:
            return []
        family = GaugeMetricFamily(
            "fairque_master_jobs",
            "Jobs of the master's namespace by state (all its shards), read at the scrape.",
            labels=["namespace", "state"],
        )
        for state, count in sorted(self.counts.items()):
            family.add_metric([self.namespace, state], count)
        return [family]


class MasterMetrics:
    """The registry behind the master's ``/metrics``, the middleware that feeds it and
    the route that serves it."""

    def __init__(
        self,
        namespace: str,
        read_states: StateCounts,
        count_workers: Callable[[], int],
        outage: OutageLog,
    ) -> None:
        self.read_states, self.outage = read_states, outage
        self.registry = CollectorRegistry()
        # The route label is the path template ("/jobs/{job_id:str}"), never the path:
        # one series per route, whatever the ids.
        self.requests = Counter(
            "fairque_master_http_requests",
            "HTTP requests the master answered, by route (its path template), method and status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "fairque_master_http_request_duration_seconds",
            "Time from a request's arrival to the end of its response, by route and method.",
            ["route", "method"],
            registry=self.registry,
        )
        self.jobs = JobStates(namespace)
        self.registry.register(self.jobs)
        workers = Gauge(
            "fairque_master_workers",
            "HTTP workers registered with the master (from its memory, read at the scrape).",
            registry=self.registry,
        )
        workers.set_function(count_workers)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route, method).observe(seconds)

    async def render(self) -> bytes:
        """The exposition text, with the jobs counted now."""
        try:
            self.jobs.counts = await self.read_states()
        except OUTAGE as exc:  # said once per outage, with the routes' 503s
            self.outage.failed(exc)
            self.jobs.counts = None
        # No await from the read to here: another scrape cannot swap the counts between.
        return generate_latest(self.registry)

    def middleware(self) -> ASGIMiddleware:
        return RequestMetrics(self)

    def route(self) -> HTTPRouteHandler:
        """``GET /metrics``, out of the API document (it is not part of the jobs API)."""

        @litestar.get(METRICS_PATH, include_in_schema=False, media_type=CONTENT_TYPE_PLAIN_0_0_4)
        async def metrics() -> Response[bytes]:
            return Response(await self.render(), media_type=CONTENT_TYPE_PLAIN_0_0_4)

        return metrics


class RequestMetrics(ASGIMiddleware):
    """Times every routed request and counts it with its status. Litestar runs route
    middleware inside the routing, so requests for no route (404) and for no method of a
    route (405) are not seen: they would be a scanner's paths, not the master's routes."""

    scopes = (ScopeType.HTTP,)

    def __init__(self, metrics: MasterMetrics) -> None:
        self.metrics = metrics

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        assert scope["type"] == ScopeType.HTTP  # the only scope asked for; says so to mypy
        started = time.perf_counter()
        status = 500  # what the server answers if the app fails before it responds

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await next_app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - started
            self.metrics.observe(scope["path_template"], scope["method"], status, seconds)
