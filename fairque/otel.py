"""OpenTelemetry tracing for the fair queue, on its hooks (install ``fairque[otel]``).

A producer traces its pushes with :class:`TracingClientHooks`, a worker its runs with
:class:`TracingHooks`::

    queue = FairQueue(url, hooks=TracingClientHooks())
    fairque worker --tasks myapp.tasks --hooks fairque.otel:TracingHooks

A push makes a PRODUCER span ``push <name>``, a child of the span current where
``push`` is called, and writes its context into the task's headers with the global
propagator (W3C ``traceparent``, ``tracestate``, ``baggage`` by default). The span marks
the task's creation, as messaging's *create* spans do: the hook runs before the push is
sent, so the round trip is in the caller's span, not in it. A worker's run is a
CONSUMER span ``run <name>``, a child of that context, with the task's tenant, name, id
and attempt as attributes, and the status ERROR when the attempt failed.

Retries: every attempt is a child of the producer's span, so a trace shows a task's
attempts side by side under its push, and an attempt after the first also carries a
link to that span, the first attempt's parent, with ``fairque.retry_of`` (the task's
id). A link to the first attempt's own span would need its id, which only the worker
that ran it knows: a worker would have to write it into the task's record, a write per
run that nothing else needs.

The SDK, its exporters and the global tracer provider are the application's to set up;
this module needs only ``opentelemetry-api``. Where no provider is set, the API's spans
do nothing and a push carries no context.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version
from typing import Any

from fairque.queue.hooks import ClientHooks
from fairque.queue.models import LeasedTask, Task
from fairque.runners.fair_worker.hooks import WorkerHooks

try:
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - the extra is installed where tests run
    raise ImportError(f"fairque.otel needs OpenTelemetry: install fairque[otel] ({exc})") from exc

# A run whose outcome hook has not come this long after the run ended will not get one
# (its run was stopped, or its failure could not be recorded: its lease was lost, or the
# server was away).
OUTCOME_WAIT_NS = 60 * 1_000_000_000


def _tracer(provider: trace.TracerProvider | None) -> trace.Tracer:
    return trace.get_tracer("fairque", version("fairque"), tracer_provider=provider)


def _span_name(operation: str, name: str | None) -> str:
    return f"{operation} {name}" if name else operation


class TracingClientHooks(ClientHooks):
    """Traces each push with a PRODUCER span and carries its context in the task's
    headers (see the module's docstring). ``tracer_provider``: the global one if None."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self.tracer = _tracer(tracer_provider)

    def before_push(self, task: Task) -> Task:
        attributes = {"fairque.tenant": task.user_id}
        if task.name:
            attributes["fairque.task_name"] = task.name
        if task.task_id:
            attributes["fairque.task_id"] = task.task_id
        with self.tracer.start_as_current_span(
            _span_name("push", task.name), kind=SpanKind.PRODUCER, attributes=attributes
        ):
            headers = dict(task.headers)
            propagate.inject(headers)
        return task.model_copy(update={"headers": headers})


class TracingHooks(WorkerHooks):
    """Traces each run with a CONSUMER span, a child of the context its push carried
    (see the module's docstring); the span is current while the function runs, so the
    spans the function makes are its children. ``tracer_provider``: the global one if
    None.

    The span covers the run and is ended by the outcome's hook (success, retry, failure,
    cancel), which sets its status; one whose outcome never comes is ended, status
    unset, once :data:`OUTCOME_WAIT_NS` has passed."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self.tracer = _tracer(tracer_provider)
        # Runs that ended and wait for their outcome: (task id, lease token) -> the span
        # and when the run ended (ns), oldest first.
        self.ended: dict[tuple[str, str], tuple[Span, int]] = {}

    @contextmanager
    def around_run(self, task: LeasedTask) -> Iterator[None]:
        parent = propagate.extract(task.headers)
        attributes: dict[str, str | int] = {"fairque.tenant": task.user_id,
            "fairque.task_id": task.task_id, "fairque.attempt": task.attempts + 1}  # fmt: skip
        if task.name:
            attributes["fairque.task_name"] = task.name
        producer = trace.get_current_span(parent).get_span_context()
        links = []
        if task.attempts and producer.is_valid:
            links.append(Link(producer, {"fairque.retry_of": task.task_id}))
        span = self.tracer.start_span(
            _span_name("run", task.name), parent, SpanKind.CONSUMER, attributes, links
        )
        try:
            with trace.use_span(span):
                yield
        finally:
            now = time.time_ns()
            self._end_forgotten(now)
            self.ended[(task.task_id, task.lease_token)] = (span, now)

    def on_success(self, task: LeasedTask, result: Any, seconds: float) -> None:
        self._end(task, "finished")

    def on_retry(self, task: LeasedTask, error: str, seconds: float) -> None:
        self._end(task, "retry", error)

    def on_failure(self, task: LeasedTask, error: str, seconds: float) -> None:
        self._end(task, "failed", error)

    def on_cancel(self, task: LeasedTask, seconds: float) -> None:
        self._end(task, "canceled")

    def _end(self, task: LeasedTask, outcome: str, error: str | None = None) -> None:
        """Ends the span of ``task``'s run, at the moment the run ended."""
        found = self.ended.pop((task.task_id, task.lease_token), None)
        if found is None:
            return  # its around_run failed, or it waited too long
        span, ended_at = found
        span.set_attribute("fairque.outcome", outcome)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(ended_at)

    def _end_forgotten(self, now: int) -> None:
        """Ends the spans of runs whose outcome did not come in time."""
        while self.ended:
            key, (span, ended_at) = next(iter(self.ended.items()))
            if now - ended_at < OUTCOME_WAIT_NS:
                return
            del self.ended[key]
            span.end(ended_at)
