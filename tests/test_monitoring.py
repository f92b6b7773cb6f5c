"""What an on-call person asks first, as metrics: how long the oldest ready task has
waited (per namespace and for the busiest tenants), task events (failures, retries,
leases that ran out), live workers per task name, and the scheduler's last cycle."""

from __future__ import annotations

import time

import pytest
from prometheus_client import CollectorRegistry

from fairque import FairQueue, InvalidInput, Priority, ShardedQueue, Task
from fairque.metrics import Metrics
from fairque.queue.models import WorkerInfo
from fairque.scheduler.metrics import SchedulerMetrics
from tests.conftest import Server, wait_for


def test_the_backlog_is_the_age_of_each_tenants_oldest_ready_task(queue: FairQueue) -> None:
    assert queue.backlog().ages == {}
    assert queue.backlog().oldest is None
    queue.push(Task(user_id="early", name="n", priority=2))
    wait_for(lambda: queue.backlog().ages["early"] > 0.05, timeout=30)
    queue.push(Task(user_id="late", name="n"))
    queue.push(Task(user_id="urgent", name="n", priority=Priority.CRITICAL))
    queue.push(Task(user_id="later", name="n", delay=60))  # not ready: not backlog
    backlog = queue.backlog()
    assert set(backlog.ages) == {"early", "late", "urgent"}
    assert backlog.ages["early"] > backlog.ages["late"] >= 0
    assert backlog.oldest == backlog.ages["early"]
    while queue.pop(count=10):
        pass
    assert queue.backlog().ages == {}


def test_the_backlog_reads_a_bounded_number_of_tenants(queue: FairQueue) -> None:
    queue.push_many([Task(user_id=f"t{n}", name="n") for n in range(30)])
    assert len(queue.backlog(tenants=5).ages) <= 10  # the 5 busiest, the 5 served longest ago
    for wrong in (0, 101, 2.5, True):
        with pytest.raises(InvalidInput, match="tenants"):
            queue.backlog(tenants=wrong)  # type: ignore[arg-type]


def test_a_sharded_backlog_covers_every_shard(server: Server, namespace: str) -> None:
    with ShardedQueue(server.url, namespace, shards=3) as queue:
        queue.push_many([Task(user_id=f"t{n}", name="n") for n in range(12)])
        assert set(queue.backlog().ages) == {f"t{n}" for n in range(12)}


def sample(registry: CollectorRegistry, metric: str, **labels: str) -> float | None:
    return registry.get_sample_value(metric, labels)


def test_the_queue_metrics_answer_the_first_questions(queue: FairQueue) -> None:
    metrics = Metrics()
    metrics.watch_queue(queue)
    ns, registry = queue.name, metrics.registry
    assert sample(registry, "fairque_oldest_ready_age_seconds", namespace=ns) == 0.0
    assert sample(registry, "fairque_server_may_evict", namespace=ns) == 0.0  # noeviction
    queue.push_many([Task(user_id="a", name="report"), Task(user_id="b", name="report")])
    wait_for(lambda: (sample(registry, "fairque_oldest_ready_age_seconds", namespace=ns) or 0) > 0)
    assert sample(registry, "fairque_tenant_oldest_ready_age_seconds", namespace=ns, tenant="a")
    assert sample(registry, "fairque_task_events_total", namespace=ns, event="pushed") == 2
    leased = queue.pop(count=2)
    queue.fail(leased[0], "boom", retry=False)
    assert sample(registry, "fairque_task_events_total", namespace=ns, event="failed") == 1
    now = time.time()
    worker = WorkerInfo("w1", "host", 1, ("report", "email"), 4, 0, now)
    queue.register_worker(worker, ttl=30)
    queue.register_worker(WorkerInfo("w2", "host", 2, ("report",), 4, 0, now), ttl=30)
    assert sample(registry, "fairque_live_workers", namespace=ns, name="report") == 2
    assert sample(registry, "fairque_live_workers", namespace=ns, name="email") == 1
    queue.set_limits("report", concurrency=3)
    assert sample(registry, "fairque_name_concurrency_limit", namespace=ns, name="report") == 3
    assert sample(registry, "fairque_name_running", namespace=ns, name="report") == 1


def test_the_scheduler_says_when_it_last_completed_a_cycle() -> None:
    figures = SchedulerMetrics()
    metrics = Metrics()
    metrics.watch_scheduler(figures)
    name = "fairque_scheduler_last_cycle_timestamp_seconds"
    assert metrics.registry.get_sample_value(name) is None  # no cycle yet: no sample
    figures.last_cycle_at = 1_800_000_000.0
    assert metrics.registry.get_sample_value(name) == 1_800_000_000.0


def test_tasks_no_live_worker_serves_are_counted(queue: FairQueue) -> None:
    queue.push(Task(user_id="a", name="orphan"))
    leased = queue.pop()
    queue.hand_over(leased, 0.05, 30.0)  # leased by a worker without the function
    counters = queue.stats().counters
    assert (counters["handed_over"], counters["unserved"]) == (1, 1)
    serving = WorkerInfo("w", "host", 1, ("orphan",), 1, 0, time.time())
    queue.register_worker(serving, ttl=30)  # now a live worker serves it
    again = wait_for(queue.pop, timeout=30)  # due again after the delay
    queue.hand_over(again, 0.05, 30.0)
    counters = queue.stats().counters
    assert (counters["handed_over"], counters["unserved"]) == (2, 1)
