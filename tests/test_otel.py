"""OpenTelemetry on the hooks (fairque.otel), with the SDK's in-memory exporter: a push
made inside a span carries its context in the task; the worker's run span is a child of
it, with the task's fields as attributes; a retry links to its first attempt's parent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from fairque import AsyncFairQueue, LeasedTask, Priority, QueueSettings, Task, otel
from fairque.otel import TracingClientHooks, TracingHooks
from fairque.runners.fair_worker.hooks import load_hooks
from fairque.worker import Registry, Worker, WorkerConfig, task
from tests.conftest import Server, until

pytestmark = pytest.mark.one_engine  # the hooks are the same on every engine

# A provider of the tests' own, not the global one (which can be set once per process).
EXPORTER = InMemorySpanExporter()
PROVIDER = TracerProvider()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))
TRACER = PROVIDER.get_tracer("tests")

functions = Registry()


@task(into=functions, name="traced")
def traced() -> None:
    with TRACER.start_as_current_span("inside"):  # on a thread: the run span is current
        pass


@task(into=functions, name="flaky")
async def flaky() -> None:
    raise ValueError("boom")


@pytest.fixture(autouse=True)
def spans() -> Iterator[None]:
    EXPORTER.clear()
    yield
    EXPORTER.clear()


def finished(name: str) -> list[ReadableSpan]:
    return [span for span in EXPORTER.get_finished_spans() if span.name == name]


async def run_worker(server: Server, namespace: str, spans: int) -> None:
    """Runs a traced worker until ``spans`` run spans have ended."""
    config = WorkerConfig(redis_url=server.url, namespace=namespace)
    worker = Worker(config, functions, hooks=TracingHooks(PROVIDER))
    running = asyncio.create_task(worker.run_async())

    async def ended() -> bool:
        return len([s for s in EXPORTER.get_finished_spans() if s.name.startswith("run ")]) >= spans

    await until(ended)
    worker.stop()
    await running


async def test_a_run_span_is_a_child_of_the_push(server: Server, namespace: str) -> None:
    queue = AsyncFairQueue(server.url, namespace, hooks=TracingClientHooks(PROVIDER))
    with TRACER.start_as_current_span("request"):
        task_id = await queue.push(Task(user_id="alice", name="traced", priority=Priority.HIGH))
    info = await queue.get(task_id)
    await queue.close()
    assert info is not None
    assert set(info.headers) == {"traceparent"}
    await run_worker(server, namespace, spans=1)
    [request], [push], [run], [inside] = (
        finished(name) for name in ("request", "push traced", "run traced", "inside")
    )
    assert push.kind is SpanKind.PRODUCER
    assert push.parent is not None
    assert push.parent.span_id == request.context.span_id
    assert dict(push.attributes or {}) == {"fairque.tenant": "alice", "fairque.task_name": "traced"}
    assert run.kind is SpanKind.CONSUMER
    assert run.parent is not None
    assert (run.parent.trace_id, run.parent.span_id) == (
        request.context.trace_id, push.context.span_id,
    )  # fmt: skip
    assert dict(run.attributes or {}) == {
        "fairque.tenant": "alice", "fairque.task_name": "traced", "fairque.task_id": task_id,
        "fairque.attempt": 1, "fairque.outcome": "finished",
    }  # fmt: skip
    assert run.links == ()
    assert run.status.status_code is StatusCode.UNSET
    assert inside.parent is not None
    assert inside.parent.span_id == run.context.span_id


async def test_a_retry_links_to_its_first_attempts_parent(server: Server, namespace: str) -> None:
    settings = QueueSettings(retry_backoff_base=0.01)
    queue = AsyncFairQueue(server.url, namespace, settings=settings,
                           hooks=TracingClientHooks(PROVIDER))  # fmt: skip
    task_id = await queue.push(Task(user_id="bob", name="flaky", max_retries=1, task_id="f-1"))
    await queue.close()
    await run_worker(server, namespace, spans=2)
    [push] = finished("push flaky")
    assert push.parent is None  # a push outside any span starts a trace
    assert (push.attributes or {})["fairque.task_id"] == task_id
    first, second = sorted(finished("run flaky"), key=lambda span: span.start_time or 0)
    for span in (first, second):
        assert span.parent is not None
        assert span.parent.span_id == push.context.span_id
        assert (span.status.status_code, span.status.description) == (
            StatusCode.ERROR, "ValueError: boom",
        )  # fmt: skip
    assert (first.attributes or {})["fairque.attempt"] == 1
    assert (first.attributes or {})["fairque.outcome"] == "retry"
    assert first.links == ()
    assert (second.attributes or {})["fairque.attempt"] == 2
    assert (second.attributes or {})["fairque.outcome"] == "failed"
    [link] = second.links
    assert link.context.span_id == push.context.span_id
    assert dict(link.attributes or {}) == {"fairque.retry_of": task_id}


def leased(attempts: int = 0) -> LeasedTask:
    """A task as a pop leases it, pushed without headers; each attempt's lease its own."""
    return LeasedTask("t1", "alice", Priority.NORMAL, None, None, attempts, 0.0,
                      str(attempts + 7), 30.0, 3, 0.0, 0.0, None)  # fmt: skip


def test_a_task_pushed_untraced_runs_in_a_trace_of_its_own() -> None:
    hooks = TracingHooks(PROVIDER)
    with hooks.around_run(leased(attempts=1)):
        pass
    hooks.on_retry(leased(attempts=1), "boom", 0.1)
    [run] = finished("run")
    assert (run.parent, run.links) == (None, ())  # no producer: nothing to link to


def test_a_run_whose_outcome_never_comes_is_ended_all_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hooks = TracingHooks(PROVIDER)
    for attempts in (0, 1):  # failures that could not be recorded: no hook follows
        with hooks.around_run(leased(attempts)):
            pass
    assert finished("run") == []  # they may still come
    monkeypatch.setattr(otel, "OUTCOME_WAIT_NS", 0)
    with hooks.around_run(leased(attempts=2)):  # the next run's end sweeps them
        pass
    forgotten = finished("run")
    assert [(span.attributes or {})["fairque.attempt"] for span in forgotten] == [1, 2]
    assert all("fairque.outcome" not in (span.attributes or {}) for span in forgotten)
    hooks.on_cancel(leased(attempts=2), 0.1)
    hooks.on_success(leased(attempts=2), None, 0.1)  # no span waits for it any more
    assert [(span.attributes or {}).get("fairque.outcome") for span in finished("run")] == [
        None, None, "canceled",
    ]  # fmt: skip


def test_the_worker_loads_the_tracing_hooks_by_name() -> None:
    assert isinstance(load_hooks("fairque.otel:TracingHooks"), TracingHooks)


def test_without_a_span_or_a_provider_a_push_carries_no_context() -> None:
    task = Task(user_id="alice", headers={"kept": "1"})
    assert TracingClientHooks().before_push(task).headers == {"kept": "1"}
