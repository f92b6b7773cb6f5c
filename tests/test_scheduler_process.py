"""Real scheduler processes (``fairque scheduler run``): many instances, kills, SIGTERM."""

from __future__ import annotations

import itertools
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable

import pytest

from fairque import FairQueue
from fairque.runners.scheduler import TaskScheduler
from fairque.scheduler import HealthStatus
from fairque.servers.embedded import LocalServer, free_port
from tests.conftest import StartCli, wait_for

Start = Callable[..., subprocess.Popen[str]]
SECOND = 1_000_000  # us


@pytest.fixture
def start_scheduler(server: LocalServer, namespace: str, start_cli: StartCli) -> Start:
    """Starts ``fairque scheduler run`` processes (ended by ``start_cli`` if still running)."""

    def start(*options: str) -> subprocess.Popen[str]:
        env = {"FAIRQUE_REDIS_URL": server.url, "FAIRQUE_NAMESPACE": namespace}
        return start_cli("scheduler", "run", "--poll-interval", "0.2", *options, env=env)

    return start


def queued_runs(queue: FairQueue) -> dict[str, list[int]]:
    """Due times of the queued runs, by schedule id (task ids are ``<schedule>@<due us>``)."""
    runs: dict[str, list[int]] = {}
    while tasks := queue.pop(count=1000, lease_seconds=300):
        for task in tasks:
            schedule_id, _, due = task.task_id.partition("@")
            runs.setdefault(schedule_id, []).append(int(due))
    return {schedule_id: sorted(times) for schedule_id, times in runs.items()}


def scrape(port: int) -> str:
    """The metrics text an instance serves, or '' while it does not answer yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            return str(reply.read().decode())
    except OSError:
        return ""


def stop(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        assert process.wait(timeout=20) == 0, process.stderr and process.stderr.read()


# Twenty seconds of wall time, once: the scheduler's scripts are the same on every engine,
# and racing instances are tested on each (test_scheduler.py).
@pytest.mark.one_engine
@pytest.mark.long
@pytest.mark.timeout(240)
def test_three_instances_for_twenty_seconds_submit_every_run_exactly_once(
    start_scheduler: Start, server: LocalServer, namespace: str
) -> None:
    with TaskScheduler(server.url, namespace) as scheduler, FairQueue(server.url, namespace) as q:
        processes = [start_scheduler() for _ in range(3)]
        wait_for(lambda: len(scheduler.instances()) == 3, timeout=60)  # all are running
        ids = [
            scheduler.add_schedule(interval=0.5, task={"name": "tick", "user_id": f"u{n}"})
            for n in range(4)
        ]
        began = time.monotonic()
        # 40 runs of each schedule, raced for by three instances polling every 0.2 s.
        wait_for(lambda: time.monotonic() - began > 20, timeout=60, interval=1.0)
        stop(processes)
        infos = {info.schedule_id: info for info in scheduler.list_schedules()}
        runs = queued_runs(q)
        records = scheduler.instances()
    assert sorted(runs) == sorted(ids)
    for schedule_id, times in runs.items():
        assert len(times) >= 36, f"only {len(times)} runs in twenty seconds"
        assert len(set(times)) == len(times)  # no duplicate
        gaps = {later - earlier for earlier, later in itertools.pairwise(times)}
        assert gaps == {SECOND // 2}  # no missed run
        info = infos[schedule_id]
        assert info.runs == len(times)
        assert info.failures == 0
        assert info.skipped == 0
    assert len(records) == 3
    assert {record["state"] for record in records.values()} == {"stopped"}
    assert sum(record["submitted"] for record in records.values()) == sum(map(len, runs.values()))
    assert sum(record["submitted"] > 0 for record in records.values()) >= 2  # work was shared


def test_a_killed_instance_loses_nothing_and_the_others_carry_on(
    start_scheduler: Start, server: LocalServer, namespace: str
) -> None:
    with TaskScheduler(server.url, namespace) as scheduler, FairQueue(server.url, namespace) as q:
        sid = scheduler.add_schedule(interval=0.2, task={"name": "tick", "user_id": "u"})
        doomed = start_scheduler("--lock-timeout", "0.5")
        survivor = start_scheduler("--lock-timeout", "0.5")
        wait_for(lambda: len(scheduler.instances()) == 2, timeout=30)  # both are running
        wait_for(lambda: scheduler.get_schedule(sid).runs >= 5)
        doomed.kill()
        doomed.wait()
        killed_at = scheduler.get_schedule(sid).runs
        wait_for(lambda: scheduler.get_schedule(sid).runs >= killed_at + 10)
        # Seen from outside: the killed instance stops beating and is reported stale (it
        # never said it stopped); the runs still go out, so a warning.
        wait_for(lambda: scheduler.health_check().status is HealthStatus.WARNING, timeout=30)
        health = scheduler.health_check()
        [problem] = health.problems
        assert "stopped beating" in problem
        assert len(health.details["live_instances"]) == 1
        stop([survivor])
        runs = queued_runs(q)[sid]
        assert len(set(runs)) == len(runs) == scheduler.get_schedule(sid).runs
        states = sorted(record["state"] for record in scheduler.instances().values())
        # None live for an active schedule: an error.
        assert scheduler.health_check().status is HealthStatus.ERROR
    assert states == ["stale", "stopped"]


def test_sigterm_stops_an_instance_and_records_it(
    start_scheduler: Start, server: LocalServer, namespace: str
) -> None:
    port = free_port()
    with TaskScheduler(server.url, namespace) as scheduler:
        process = start_scheduler("--metrics-port", str(port))
        wait_for(scheduler.instances, timeout=30)  # it has started and run a cycle
        assert "fairque_scheduler_cycles_total" in wait_for(lambda: scrape(port))
        stop([process])
        [record] = scheduler.instances().values()
    assert record["state"] == "stopped"
    assert record["pid"] == process.pid
