"""A namespace's settings live in the server: one source of truth for every client."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from typer.testing import CliRunner

from fairque import FairQueue, QueueSettings, Task, TaskState
from fairque.cli import app
from fairque.servers.embedded import LocalServer
from tests.conftest import Server

pytestmark = pytest.mark.cluster


def test_a_producers_settings_apply_to_a_worker_without_any(server: Server, namespace: str) -> None:
    with (
        FairQueue(server.url, namespace, settings=QueueSettings(retry_backoff_base=600.0,
                                                                failed_ttl=0)) as producer,
        FairQueue(server.url, namespace) as worker,
    ):  # fmt: skip
        producer.push(Task(user_id="u", task_id="once", max_retries=1))
        [leased] = worker.pop()
        assert worker.fail(leased, "boom") is TaskState.SCHEDULED
        info = worker.get("once")
        assert info is not None
        assert info.execute_after is not None
        seconds, micros = worker.redis.time()
        assert info.execute_after - (seconds + micros / 1e6) > 500  # the producer's backoff
        producer.push(Task(user_id="u", task_id="final", max_retries=0))
        [leased] = [task for task in worker.pop() if task.task_id == "final"] or worker.pop()
        assert worker.fail(leased, "boom") is TaskState.FAILED
        assert worker.get("final") is None  # failed_ttl=0: dropped after the last attempt
        assert worker.namespace_settings() == QueueSettings(retry_backoff_base=600.0, failed_ttl=0)


def test_a_client_that_changes_anothers_settings_says_so(
    make_queue: Callable[..., FairQueue], caplog: pytest.LogCaptureFixture
) -> None:
    first = make_queue(QueueSettings(finished_ttl=60))
    first.stats()
    second = make_queue(QueueSettings(finished_ttl=120, xcom_ttl=5))
    with caplog.at_level(logging.WARNING, logger="fairque.settings"):
        second.stats()
    [record] = caplog.records
    assert "finished_ttl 60.0 -> 120.0" in record.getMessage()
    assert "xcom_ttl" not in record.getMessage()  # never written before: nothing changed
    assert first.namespace_settings().finished_ttl == 120  # the last writer's


def test_only_the_settings_given_are_written(make_queue: Callable[..., FairQueue]) -> None:
    make_queue(QueueSettings(failed_ttl=5)).stats()
    make_queue(QueueSettings(finished_ttl=7)).stats()
    reader = make_queue()
    assert (reader.namespace_settings().failed_ttl, reader.namespace_settings().finished_ttl) == (
        5,
        7,
    )


def test_a_payload_over_the_namespaces_limit_is_refused_by_the_server(
    make_queue: Callable[..., FairQueue],
) -> None:
    make_queue(QueueSettings(max_payload_bytes=100)).stats()
    other = make_queue()  # has no limit of its own: the namespace's applies
    with pytest.raises(Exception, match="over the 100 limit") as refused:
        other.push(Task(user_id="u", payload="x" * 500))
    assert getattr(refused.value, "field", None) == "payload"


def test_the_settings_command(server: LocalServer, namespace: str) -> None:
    runner = CliRunner()
    where = ["--url", server.url, "--namespace", namespace]
    done = runner.invoke(app, ["settings", "set", "finished_ttl=30", "failed_ttl=0", *where])
    assert done.exit_code == 0, done.output
    shown = runner.invoke(app, ["settings", "show", *where])
    assert '"finished_ttl": 30.0' in shown.stdout
    assert '"failed_ttl": 0.0' in shown.stdout
    for bad in (["colour=blue"], ["finished_ttl=-1"], ["finished_ttl"]):
        refused = runner.invoke(app, ["settings", "set", *bad, *where])
        assert refused.exit_code == 2
        assert "error:" in refused.stderr
