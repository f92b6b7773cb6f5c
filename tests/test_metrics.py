"""Prometheus metrics, read back by parsing the exposition output over HTTP."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from fairque import AsyncFairQueue, FairQueue, Task
from fairque.cli import app
from fairque.metrics import Metrics
from fairque.queue.client import open_queue
from fairque.runners.storage_worker import HandlerStats, StorageWorker, StorageWorkerConfig
from fairque.scheduler.metrics import SchedulerMetrics
from fairque.servers.embedded import LocalServer
from fairque.storage import AsyncMemoryStorage, AsyncStorage, PutTaskRequest, RedisStorage
from fairque.storage.contract import Contract
from fairque.worker import Registry, Worker, WorkerConfig, task
from tests.conftest import wait_for

pytestmark = pytest.mark.cluster

functions = Registry()


@task(into=functions, name="double")
def double(x: int) -> int:
    return 2 * x


@task(into=functions, name="broken")
def broken() -> None:
    raise RuntimeError("always")


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(metrics: Metrics) -> Samples:
    """GETs /metrics from the endpoint and parses every sample."""
    server = metrics.serve()
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
    finally:
        server.close()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


async def test_job_processor_metrics(metrics: Metrics) -> None:
    contract = Contract.from_yaml("queues: [{id: 4, name: jobs, fields: {n: int}}]")
    storage = AsyncMemoryStorage()
    await storage.put_tasks([contract.queue(4).request({"n": n}) for n in range(3)])
    inside: list[Samples] = []

    async def handle(storage: AsyncStorage, tasks: list[Any]) -> HandlerStats:
        await asyncio.sleep(0)  # the second processor starts (and finds nothing to take)
        inside.append(scrape(metrics))
        await storage.done_task([t.task_id for t in tasks[1:]])
        return HandlerStats(processed=len(tasks) - 1, errors=1)

    config = StorageWorkerConfig(max_processors=2, idle_wait=0.02)
    worker = StorageWorker(storage, contract, {"jobs": handle}, config, metrics)
    running = asyncio.create_task(worker.run())
    while not inside:
        await asyncio.sleep(0.01)
    worker.stop()
    await running
    during = inside[0]
    assert during[("queue_tasks_in_progress", (("queue_num", "4"),))] == 3
    assert during[("queue_running_workers", ())] == 1
    assert during[("queue_running_job_processors", ())] == 2
    after = scrape(metrics)
    assert after[("queue_running_workers", ())] == 0
    assert after[("queue_running_job_processors", ())] == 0
    assert after[("queue_tasks_in_progress", (("queue_num", "4"),))] == 0
    cycles = ("queue_job_processor_cycle_duration_seconds_count", (("queue_num", "4"),))
    assert after[cycles] == 1
    processed = ("queue_handled_tasks_total", (("outcome", "processed"), ("queue_num", "4")))
    errors = ("queue_handled_tasks_total", (("outcome", "errors"), ("queue_num", "4")))
    assert (after[processed], after[errors]) == (2, 1)


def test_task_counts_by_state(metrics: Metrics, server: LocalServer, namespace: str) -> None:
    with RedisStorage(server.url, namespace) as storage, FairQueue(server.url, namespace) as q:
        storage.put_tasks([PutTaskRequest(2, b"a"), PutTaskRequest(2, b"b", delay=60)])
        storage.get_task(2, 1)
        q.push(Task(user_id="alice"))
        metrics.watch_storage(storage)
        metrics.watch_queue(q, namespace)
        before = scrape(metrics)
        q.reap()
        samples = scrape(metrics)
    label = (("namespace", namespace),)
    assert ("fairque_maintenance_last_run_timestamp_seconds", label) not in before  # never ran
    assert samples[("fairque_maintenance_rounds_total", label)] == 1
    assert samples[("fairque_maintenance_dropped_total", label)] == 0
    assert samples[("fairque_maintenance_last_run_timestamp_seconds", label)] > 1.7e9
    for state, count in (("ready", 0), ("taken", 1), ("delayed", 1)):
        assert samples[("queue_tasks", (("queue_num", "2"), ("state", state)))] == count
    fair = {key[1][1][1]: value for key, value in samples.items() if key[0] == "fairque_tasks"}
    assert (fair["queued"], fair["started"], fair["scheduled"]) == (1, 1, 1)


def test_an_unreachable_server_drops_only_its_metric(metrics: Metrics) -> None:
    with (
        RedisStorage("redis://127.0.0.1:1/0") as storage,
        FairQueue("redis://127.0.0.1:1/0") as queue,
    ):
        metrics.watch_storage(storage)
        metrics.watch_queue(queue, "default")
        samples = scrape(metrics)
    assert ("queue_running_workers", ()) in samples
    assert not any(name in {"queue_tasks", "fairque_tasks"} for name, _ in samples)


async def test_fair_task_durations(metrics: Metrics, server: LocalServer, namespace: str) -> None:
    async with AsyncFairQueue(server.url, namespace) as queue:
        await queue.push_many([double.build(user_id="u", args=[n]) for n in range(4)])
        await queue.push(broken.build(user_id="u", max_retries=0))
        config = WorkerConfig(redis_url=server.url, namespace=namespace)
        worker = Worker(config, functions, metrics=metrics)
        running = asyncio.create_task(worker.run_async())
        while worker.finished + worker.failed < 5:
            await asyncio.sleep(0.01)
        worker.stop()
        await running
    samples = scrape(metrics)
    finished = (("name", "double"), ("outcome", "finished"))
    assert samples[("fairque_task_duration_seconds_count", finished)] == 4
    failed = (("name", "broken"), ("outcome", "failed"))
    assert samples[("fairque_task_duration_seconds_count", failed)] == 1


@pytest.mark.one_engine  # a worker process's metrics endpoint: the engine's figures are
@pytest.mark.parametrize("shards", [1, 3])  # tested on each in-process
def test_fair_worker_process_serves_metrics(
    tmp_path: Path, server: LocalServer, namespace: str, shards: int
) -> None:
    module = (
        "from fairque.worker import task\n\n@task(name='triple')\ndef triple(x): return 3 * x\n"
    )
    (tmp_path / "metric_tasks.py").write_text(module)
    command = [
        sys.executable, "-c", "from fairque.cli import main; main()", "worker",
        "--tasks", "metric_tasks", "--url", server.url, "--namespace", namespace,
        "--metrics-port", "0", "--shards", str(shards),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    worker = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout is not None
        address = worker.stdout.readline().split()[-1]
        with open_queue(server.url, namespace, shards) as queue:
            tasks = [Task(user_id=f"u{n}", name="triple", payload={"args": [n]}) for n in range(3)]
            queue.push_many(tasks)
            # A worker process starting on a loaded machine (imports, then the first
            # poll if the push came before its subscription): a bound, not a pause.
            wait_for(lambda: queue.stats().counters.get("finished") == 3, timeout=30)
        with urllib.request.urlopen(address, timeout=10) as response:
            text = response.read().decode()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    assert 'fairque_task_duration_seconds_count{name="triple",outcome="finished"} 3.0' in text
    # A sharded queue's gauge counts the tasks of all of its shards.
    assert f'fairque_tasks{{namespace="{namespace}",state="finished"}} 3.0' in text


def test_metrics_port_needs_one_process() -> None:
    result = CliRunner().invoke(app, ["worker", "--processes", "2", "--metrics-port", "0"])
    assert result.exit_code == 2
    assert "--processes 1" in result.output


def test_scheduler_metrics(metrics: Metrics) -> None:
    figures = SchedulerMetrics(skipped=2, lock_busy=3, cycles=7, running=True)
    figures.submission(0.25)
    figures.submission(0.75)
    figures.failure()
    figures.lock_time.append(0.001)
    metrics.watch_scheduler(figures)
    samples = scrape(metrics)
    runs = {outcome: samples[("fairque_scheduler_runs_total", (("outcome", outcome),))]
            for outcome in ("submitted", "failed", "skipped", "stale")}  # fmt: skip
    assert runs == {"submitted": 2, "failed": 1, "skipped": 2, "stale": 0}
    assert samples[("fairque_scheduler_locks_busy_total", ())] == 3
    assert samples[("fairque_scheduler_cycles_total", ())] == 7
    assert samples[("fairque_scheduler_submissions_per_minute", ())] == 2
    assert samples[("fairque_scheduler_running", ())] == 1
    assert samples[("fairque_scheduler_latency_seconds", (("quantile", "0.99"),))] == 0.75
    assert samples[("fairque_scheduler_lock_time_seconds", (("quantile", "0.5"),))] == 0.001


def test_fairness_metrics_keep_the_busiest_tenants_and_an_other_bucket(
    metrics: Metrics, server: LocalServer, namespace: str
) -> None:
    with FairQueue(server.url, namespace) as queue:
        for i in range(25):  # 25 tenants, tenant-i with i + 1 tasks
            queue.push_many([Task(user_id=f"tenant-{i}") for _ in range(i + 1)])
        queue.set_tenant("tenant-24", concurrency=50)
        started = 0
        while batch := queue.pop(count=100):
            started += len(batch)
        metrics.watch_queue(queue, namespace)
        samples = scrape(metrics)
    per_minute = {
        dict(labels)["tenant"]: value
        for (name, labels), value in samples.items()
        if name == "fairque_tenant_starts_per_minute"
    }
    assert len(per_minute) == 21  # the 20 busiest and "other": bounded cardinality
    assert per_minute["tenant-24"] == 25 / 5
    assert per_minute["other"] == sum(range(1, 6)) / 5  # tenants 0..4: 15 starts
    assert sum(per_minute.values()) * 5 == started
    label = (("namespace", namespace), ("tenant", "tenant-24"))
    assert samples[("fairque_tenant_running", label)] == 25
    assert samples[("fairque_tenant_concurrency_limit", label)] == 50
    assert 0 < samples[("fairque_tenant_share", label)] < 1
    wait = samples[("fairque_tenant_wait_seconds", tuple(sorted((*label, ("quantile", "0.99")))))]
    assert 0 < wait < 60
