"""Prometheus metrics: the storage's job-processor metrics, task counts by state (storage
queues and the fair queue) and fair task durations, served over HTTP on 127.0.0.1, with
the liveness and readiness answers an orchestrator probes (``/livez``, ``/readyz``).

>>> metrics = Metrics()
>>> metrics.watch_storage(storage)  # queue_tasks{queue_num, state}  # doctest: +SKIP
>>> server = metrics.serve(9102)  # GET http://127.0.0.1:9102/metrics  # doctest: +SKIP
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Iterable
from http import HTTPStatus
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from redis.exceptions import RedisError

from fairque.engine.eviction import may_evict
from fairque.errors import FairQueueError
from fairque.queue.client import FairQueue, Queue, ShardedQueue
from fairque.queue.models import FairnessView, wait_percentile
from fairque.scheduler.metrics import SchedulerMetrics
from fairque.storage.protocol import Storage

log = logging.getLogger("fairque.metrics")

_CYCLE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


Reader = Callable[[], Iterable[tuple[list[str], int]]]  # (label values, count) pairs


class _StateCollector:
    """A gauge family read from the server at each scrape (never stale, costs one call)."""

    def __init__(self, name: str, help_text: str, labels: list[str], read: Reader) -> None:
        self.name, self.help_text, self.labels, self.read = name, help_text, labels, read

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(self.name, self.help_text, labels=self.labels)
        try:
            for values, count in self.read():
                family.add_metric(values, count)
        except (FairQueueError, RedisError) as exc:
            log.warning("cannot read %s: %s", self.name, exc)  # the other metrics still serve
            return []
        return [family]


class _QueueCollector:
    """A fair queue's tasks per state and its maintenance, from one stats call a scrape."""

    def __init__(self, queue: Queue, namespace: str) -> None:
        self.queue, self.namespace = queue, namespace

    def collect(self) -> Iterable[Metric]:
        try:
            stats = self.queue.stats()
            live = self._live_workers()
            backlog = self._backlog()
            limits = self._name_limits()
            policy = may_evict(self.queue.redis)
        except (FairQueueError, RedisError) as exc:
            log.warning("cannot read fairque_tasks: %s", exc)  # the other metrics still serve
            return []
        labels = [self.namespace]
        tasks = GaugeMetricFamily(
            "fairque_tasks", "Tasks of a fairque namespace by state.", labels=["namespace", "state"]
        )
        for state, count in stats.states.items():
            tasks.add_metric([*labels, state.value], count)
        maintenance = stats.maintenance
        last_run = GaugeMetricFamily(
            "fairque_maintenance_last_run_timestamp_seconds",
            "When the namespace's last maintenance round ran (server clock; the oldest shard's).",
            labels=["namespace"],
        )
        if maintenance.last_run_at is not None:
            last_run.add_metric(labels, maintenance.last_run_at)
        rounds = CounterMetricFamily(
            "fairque_maintenance_rounds", "Maintenance rounds run.", labels=["namespace"]
        )
        rounds.add_metric(labels, maintenance.rounds)
        dropped = CounterMetricFamily(
            "fairque_maintenance_dropped",
            "Expired ended tasks dropped from the registries by maintenance.",
            labels=["namespace"],
        )
        dropped.add_metric(labels, maintenance.dropped)
        events = CounterMetricFamily(
            "fairque_task_events",
            "Task events since the namespace began: pushed, started, finished, failed (for "
            "good), retried, canceled, expired (leases that ran out: work of dead workers)...",
            labels=["namespace", "event"],
        )
        for event, count in sorted(stats.counters.items()):
            events.add_metric([*labels, event], count)
        evicts = GaugeMetricFamily(
            "fairque_server_may_evict",
            "1 if the server's maxmemory-policy may evict keys (tasks among them), 0 if it "
            "is noeviction; absent where CONFIG GET is refused.",
            labels=["namespace"],
        )
        if policy is not None:
            evicts.add_metric(labels, float(policy))
        families = [tasks, last_run, rounds, dropped, events, live, *backlog, *limits, evicts]
        if stats.fairness is not None:
            families += _fairness_families(self.namespace, stats.fairness)
        return families

    def _backlog(self) -> list[Metric]:
        backlog = self.queue.backlog(BACKLOG_TENANTS)
        oldest = GaugeMetricFamily(
            "fairque_oldest_ready_age_seconds",
            "How long the oldest ready task has waited (queue latency; 0 with none ready): of "
            "the busiest tenants and of those served longest ago.",
            labels=["namespace"],
        )
        oldest.add_metric([self.namespace], backlog.oldest or 0.0)
        per_tenant = GaugeMetricFamily(
            "fairque_tenant_oldest_ready_age_seconds",
            "How long a tenant's oldest ready task has waited (the busiest tenants and those "
            "served longest ago, at most 40).",
            labels=["namespace", "tenant"],
        )
        for tenant, age in sorted(backlog.ages.items()):
            per_tenant.add_metric([self.namespace, tenant], age)
        return [oldest, per_tenant]

    def _name_limits(self) -> list[Metric]:
        labels = ["namespace", "name"]
        running = GaugeMetricFamily(
            "fairque_name_running",
            f"Tasks of a task name with limits STARTED now (at most {LIMITED_NAMES} names).",
            labels=labels,
        )
        limit = GaugeMetricFamily(
            "fairque_name_concurrency_limit",
            "A task name's concurrency limit across all workers (0: none).",
            labels=labels,
        )
        for one in self.queue.names_with_limits(0, LIMITED_NAMES).names:
            running.add_metric([self.namespace, one.name], one.running)
            limit.add_metric([self.namespace, one.name], one.concurrency)
        return [running, limit]

    def _live_workers(self) -> Metric:
        family = GaugeMetricFamily(
            "fairque_live_workers",
            "Live workers of the namespace that serve a task name.",
            labels=["namespace", "name"],
        )
        serving = collections.Counter(
            name for worker in self.queue.workers() for name in worker.functions
        )
        for name in sorted(serving):
            family.add_metric([self.namespace, name], serving[name])
        return family


OTHER_TENANTS = "other"  # the label of every tenant outside the busiest 20
BACKLOG_TENANTS = 20  # tenants of each kind whose oldest ready task a scrape reads
LIMITED_NAMES = 100  # task names with limits a scrape reads (one page)


def _fairness_families(namespace: str, view: FairnessView) -> list[Metric]:
    """Per-tenant service over the last 5 minutes: the 20 busiest tenants by name, the
    rest as tenant="other", so a namespace has at most 21 tenant label values."""
    labels = ["namespace", "tenant"]
    per_minute = GaugeMetricFamily(
        "fairque_tenant_starts_per_minute",
        "Tasks started per minute (last 5 minutes).",
        labels=labels,
    )
    share = GaugeMetricFamily(
        "fairque_tenant_share", "Share of all starts (last 5 minutes, 0 to 1).", labels=labels
    )
    wait = GaugeMetricFamily(
        "fairque_tenant_wait_seconds",
        "Wait from ready to start (last 5 minutes; upper bucket edge, within 1.5x).",
        labels=[*labels, "quantile"],
    )
    running = GaugeMetricFamily(
        "fairque_tenant_running", "Tasks of the tenant STARTED now.", labels=labels
    )
    limit = GaugeMetricFamily(
        "fairque_tenant_concurrency_limit",
        "The tenant's concurrency limit (0: none).",
        labels=labels,
    )
    rows = [(one.tenant, one.starts, one.waits) for one in view.tenants]
    if view.other_starts:
        rows.append((OTHER_TENANTS, view.other_starts, view.other_waits))
    for tenant, starts, waits in rows:
        per_minute.add_metric([namespace, tenant], starts / view.minutes)
        share.add_metric([namespace, tenant], starts / view.starts if view.starts else 0.0)
        for quantile in (0.5, 0.99):
            seconds = wait_percentile(waits, quantile)
            if seconds is not None:
                wait.add_metric([namespace, tenant, str(quantile)], seconds)
    for one in view.tenants:
        running.add_metric([namespace, one.tenant], one.shares.running)
        limit.add_metric([namespace, one.tenant], one.shares.concurrency)
    return [per_minute, share, wait, running, limit]


class _SchedulerCollector:
    """The scheduler's figures, read from the instance's in-process metrics."""

    def __init__(self, metrics: SchedulerMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterable[Metric]:
        figures = self.metrics.summary()
        runs = CounterMetricFamily(
            "fairque_scheduler_runs", "Due runs by outcome.", labels=["outcome"]
        )
        for outcome in ("submitted", "failed", "skipped", "stale"):
            runs.add_metric([outcome], figures[outcome])
        yield runs
        yield CounterMetricFamily(
            "fairque_scheduler_locks_busy", "Due schedules another instance held.",
            value=figures["lock_busy"],
        )  # fmt: skip
        yield CounterMetricFamily(
            "fairque_scheduler_cycles", "Completed cycles.", value=figures["cycles"]
        )
        yield GaugeMetricFamily(
            "fairque_scheduler_submissions_per_minute", "Runs queued in the last minute.",
            value=figures["submissions_per_minute"],
        )  # fmt: skip
        yield GaugeMetricFamily(
            "fairque_scheduler_running", "1 while the instance runs.", value=self.metrics.running
        )
        last_cycle = GaugeMetricFamily(
            "fairque_scheduler_last_cycle_timestamp_seconds",
            "When the instance last completed a cycle (epoch seconds; absent before the first).",
        )
        if self.metrics.last_cycle_at is not None:
            last_cycle.add_metric([], self.metrics.last_cycle_at)
        yield last_cycle
        for name, help_text in (
            ("latency", "Due time to queued (server clock), recent runs."),
            ("lock_time", "Round trip that claims a cycle's schedule locks, recent cycles."),
        ):
            family = GaugeMetricFamily(
                f"fairque_scheduler_{name}_seconds", help_text, labels=["quantile"]
            )
            for quantile, label in (("p50", "0.5"), ("p99", "0.99")):
                value = figures[f"{name}_{quantile}"]
                if value is not None:
                    family.add_metric([label], value)
            yield family


LIVE_PATH = "/livez"  # 200 while the process runs
READY_PATH = "/readyz"  # 200 while its server answers, else 503 and why
PROBE_TIMEOUT = 2.0  # seconds a readiness probe waits for the server

Probe = Callable[[], object]  # returns if the server answers, raises why if it does not


READY = "ready\n"


def not_ready(exc: BaseException) -> str:
    """The text of a 503 readiness answer: why, in one line."""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return f"not ready: {reason}\n"


def readiness(probe: Probe) -> tuple[int, str]:
    """The status and text of a readiness answer: 200, or 503 with the reason in a line."""
    try:
        probe()
    except Exception as exc:  # whatever fails, the process cannot serve now
        return 503, not_ready(exc)
    return 200, READY


def monitoring_app(registry: CollectorRegistry | None, probe: Probe | None) -> Any:
    """A WSGI app answering ``/livez``, ``/readyz`` (with ``probe``) and, with
    ``registry``, the metrics on every other path, as Prometheus's own server does."""
    metrics = make_wsgi_app(registry) if registry is not None else None

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == LIVE_PATH:
            status, text = 200, "live\n"
        elif path == READY_PATH and probe is not None:
            status, text = readiness(probe)
        elif metrics is not None:
            return metrics(environ, start_response)  # type: ignore[no-any-return]
        else:
            status, text = 404, "not found\n"
        phrase = HTTPStatus(status).phrase
        start_response(f"{status} {phrase}", [("Content-Type", "text/plain; charset=utf-8")])
        return [text.encode()]

    return app


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a probe in flight never holds the process up


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # a probe every few seconds is no news


def serve_health(probe: Probe, port: int = 0, host: str = "127.0.0.1") -> MetricsServer:
    """Answers ``/livez`` and ``/readyz`` (``probe``) on ``host:port`` from a thread."""
    return MetricsServer.start(monitoring_app(None, probe), port, host)


class MetricsServer:
    """An HTTP endpoint served from a thread (metrics, health); ``port`` is where it
    listens."""

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server, self._thread = server, thread
        self.port: int = server.server_port

    @classmethod
    def start(cls, app: Any, port: int, host: str) -> MetricsServer:
        server = make_server(host, port, app, _ThreadingServer, handler_class=_QuietHandler)
        thread = threading.Thread(target=server.serve_forever, name="fairque-http", daemon=True)
        thread.start()
        return cls(server, thread)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class Metrics:
    """Every fairque metric, in its own registry (or ``registry``). It is the
    :class:`~fairque.engine.observer.Observer` the workers report to."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        reg = self.registry
        self.cycle_duration = Histogram(
            "queue_job_processor_cycle_duration_seconds",
            "One job processor cycle: take a batch and handle it.",
            ["queue_num"],
            buckets=_CYCLE_BUCKETS,
            registry=reg,
        )
        self.slow_cycles = Counter(
            "queue_job_processor_slow_cycles",
            "Job processor cycles longer than the worker's slow_cycle (10 s by default).",
            ["queue_num"],
            registry=reg,
        )
        self.tasks_in_progress = Gauge(
            "queue_tasks_in_progress",
            "Tasks handed to a handler, not yet returned.",
            ["queue_num"],
            registry=reg,
        )
        self.running_workers = Gauge("queue_running_workers", "Running workers.", registry=reg)
        self.running_job_processors = Gauge(
            "queue_running_job_processors", "Running job processors.", registry=reg
        )
        self.handled_tasks = Counter(
            "queue_handled_tasks",
            "Tasks handlers reported, by outcome (processed, errors, retried).",
            ["queue_num", "outcome"],
            registry=reg,
        )
        self.task_duration = Histogram(
            "fairque_task_duration_seconds",
            "Run time of fair-queue task functions.",
            ["name", "outcome"],
            registry=reg,
        )

    def observe_cycle(self, queue_num: int, seconds: float, slow: bool) -> None:
        label = str(queue_num)
        self.cycle_duration.labels(label).observe(seconds)
        if slow:
            self.slow_cycles.labels(label).inc()

    def observe_task(self, name: str | None, succeeded: bool, seconds: float) -> None:
        outcome = "finished" if succeeded else "failed"
        self.task_duration.labels(name or "", outcome).observe(seconds)

    def observe_handled(self, queue_num: int, outcome: str, count: int) -> None:
        self.handled_tasks.labels(str(queue_num), outcome).inc(count)

    def observe_in_progress(self, queue_num: int, change: int) -> None:
        self.tasks_in_progress.labels(str(queue_num)).inc(change)

    def observe_running(self, what: str, change: int) -> None:
        gauge = self.running_workers if what == "workers" else self.running_job_processors
        gauge.inc(change)

    def watch_storage(self, storage: Storage) -> None:
        """Adds ``queue_tasks{queue_num, state}``: ready, taken and delayed per queue."""

        def read() -> Iterable[tuple[list[str], int]]:
            for stat in storage.get_stat().queues.values():
                label = str(stat.queue_num)
                yield from (
                    ([label, "ready"], stat.ready),
                    ([label, "taken"], stat.taken),
                    ([label, "delayed"], stat.delayed),
                )

        help_text = "Tasks of each numbered queue by state."
        labels = ["queue_num", "state"]
        self.registry.register(_StateCollector("queue_tasks", help_text, labels, read))

    def watch_queue(self, queue: FairQueue | ShardedQueue, namespace: str | None = None) -> None:
        """Adds ``fairque_tasks{namespace, state}``, the fair queue's tasks per state (of
        all its shards, for a sharded queue), and its maintenance:
        ``fairque_maintenance_last_run_timestamp_seconds``, ``..._rounds_total`` and
        ``..._dropped_total`` (``{namespace}``: ``namespace``, else the queue's name)."""
        self.registry.register(_QueueCollector(queue, namespace or queue.name))

    def watch_scheduler(self, metrics: SchedulerMetrics) -> None:
        """Adds a scheduler instance's figures: ``fairque_scheduler_runs_total{outcome}``,
        locks found busy, cycles, submissions per minute, latency and lock time p50 / p99."""
        self.registry.register(_SchedulerCollector(metrics))

    def serve(
        self, port: int = 0, host: str = "127.0.0.1", probe: Probe | None = None
    ) -> MetricsServer:
        """Serves ``/metrics`` on ``host:port`` (port 0: any free port) from a thread,
        and ``/livez``, and ``/readyz`` with ``probe``."""
        return MetricsServer.start(monitoring_app(self.registry, probe), port, host)
