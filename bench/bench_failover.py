"""What a failover costs, as a user would see it: a producer pushing to 20 tenants and two
``fairque worker`` processes, while the master of the queue's data is killed.

    uv run python bench/bench_failover.py [--scenario NAME ...] [--seconds 12]

Scenarios (all by default):

- ``shards-r1``: a local cluster of 3 masters with a replica each (node timeout 2 s), a
  queue of 6 shards over all of them, pushes with ``replicas=1``; the master of slot 0
  is killed (the node redis-py's cluster client asks where an FCALL goes).
- ``shards-r0``: the same with ``replicas=0`` (acknowledged at once).
- ``slot0-r0``: one namespace on the master of slot 0, ``replicas=0``.
- ``sentinel-r1``: a primary, a replica and 3 sentinels, through a ``redis+sentinel://``
  URL, ``replicas=1``; the primary is killed.

The dying master's replica is stopped (SIGSTOP) for the last half second before the kill,
so that the crash loses what a real crash loses: writes the replica never received. The
producer pushes one task per call with its own id; each task appends its id to a file.
Printed per scenario: pushed, acknowledged, ran, lost (acknowledged and never run),
duplicated (ran more than once), the time from the kill to the first acknowledged push
and the first run of a task of the killed master's data, the workers' exit statuses on
SIGTERM and how many lines they wrote to stderr. Asserts nothing; targets loopback only;
stops every process it started.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairque import FairQueue, NotReplicated, ShardedQueue, Task
from fairque.engine.shards import shard_index
from fairque.servers.embedded import LocalServer
from fairque.servers.local_cluster import LocalCluster

TASKS_MODULE = textwrap.dedent(
    """
    import os, time
    from fairque.worker import task

    @task(name="record")
    def record(task_id: str) -> None:
        with open(os.environ["RAN_LOG"], "a") as log:  # one short line: an atomic append
            log.write(f"{time.time():.6f} {task_id}\\n")
    """
)
TENANTS = 20
SHARDS = 6


@dataclass
class Pushes:
    """What the producer did: per task id, when its push was acknowledged (or not)."""

    tried: int = 0
    acknowledged: dict[str, float] = field(default_factory=dict)
    unconfirmed: list[str] = field(default_factory=list)  # made, too few replicas had it
    failed: int = 0


@dataclass
class Setup:
    url: str
    queue: Callable[[], FairQueue | ShardedQueue]
    worker_args: list[str]
    dying: LocalServer  # the master to kill
    replica: LocalServer  # its replica, paused before the kill
    on_dying: Callable[[str], bool]  # whether a task id's data lives on the dying master
    replicas: int


def produce(setup: Setup, pushes: Pushes, stop: threading.Event) -> None:
    """Pushes one task per call, round robin over the tenants, until ``stop``."""
    with setup.queue() as queue:
        n = 0
        while not stop.is_set():
            task_id = f"t{n % TENANTS}-{uuid.uuid4().hex[:10]}"
            task = Task(user_id=f"t{n % TENANTS}", name="record", task_id=task_id,
                        payload={"args": [task_id], "kwargs": {}})  # fmt: skip
            n += 1
            pushes.tried += 1
            try:
                queue.push(task, replicas=setup.replicas, replica_timeout=0.5)
                pushes.acknowledged[task_id] = time.time()
            except NotReplicated:
                pushes.unconfirmed.append(task_id)
            except Exception:
                pushes.failed += 1
                time.sleep(0.02)
            time.sleep(0.004)


def ran_log(path: Path) -> list[tuple[float, str]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        when, _, task_id = line.partition(" ")
        rows.append((float(when), task_id))
    return rows


@contextmanager
def workers(setup: Setup, folder: Path, log: Path) -> Iterator[list[subprocess.Popen[str]]]:
    env = {**os.environ, "RAN_LOG": str(log), "PYTHONPATH": str(folder)}
    command = [
        sys.executable, "-c", "from fairque.cli import main; main()", "worker",
        "--url", setup.url, "--tasks", "failover_tasks", "--concurrency", "10",
        *setup.worker_args,
    ]  # fmt: skip
    started = [
        subprocess.Popen(
            command,
            cwd=folder,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                process.kill()
                process.wait()


def wait_until(probe: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return True
        time.sleep(0.05)
    return False


def drill(name: str, setup: Setup, seconds: float, kill: Callable[[], None]) -> None:
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        (folder / "failover_tasks.py").write_text(TASKS_MODULE)
        log = folder / "ran.log"
        pushes = Pushes()
        stop = threading.Event()
        with workers(setup, folder, log) as processes:
            producer = threading.Thread(target=produce, args=(setup, pushes, stop))
            producer.start()
            wait_until(lambda: len(pushes.acknowledged) >= 300, 60)
            assert setup.replica.process is not None
            os.kill(setup.replica.process.pid, signal.SIGSTOP)  # its last half second lost
            time.sleep(0.5)
            killed_at = time.time()
            kill()
            os.kill(setup.replica.process.pid, signal.SIGCONT)
            time.sleep(seconds)
            stop.set()
            producer.join()
            acknowledged = set(pushes.acknowledged)
            wait_until(lambda: acknowledged <= {task_id for _, task_id in ran_log(log)}, 60)
            for process in processes:
                process.send_signal(signal.SIGTERM)
            statuses, stderr_lines, tracebacks = [], 0, 0
            for process in processes:
                _, err = process.communicate(timeout=60)
                statuses.append(process.returncode)
                stderr_lines += len(err.splitlines())
                tracebacks += err.count("Traceback")
        runs = ran_log(log)
    counts = Counter(task_id for _, task_id in runs)
    lost = [task_id for task_id in acknowledged if not counts[task_id]]
    first_push = min(
        (at for task_id, at in pushes.acknowledged.items()
         if at > killed_at and setup.on_dying(task_id)), default=None,
    )  # fmt: skip
    first_run = min(
        (at for at, task_id in runs if at > killed_at and setup.on_dying(task_id)), default=None
    )

    def after(at: float | None) -> str:
        return "never" if at is None else f"{at - killed_at:.1f} s"

    print(
        f"{name}: pushed {pushes.tried}, acknowledged {len(acknowledged)}, unconfirmed "
        f"{len(pushes.unconfirmed)}, ran {len(counts)}, lost {len(lost)}, duplicated "
        f"{sum(1 for c in counts.values() if c > 1)}, kill -> first push {after(first_push)}"
        f" / first run {after(first_run)}; workers' exit on SIGTERM {statuses}, stderr "
        f"{stderr_lines} lines, {tracebacks} tracebacks",
        flush=True,
    )


def tenant_on(cluster: LocalCluster, namespace: str, master: LocalServer) -> Callable[[str], bool]:
    """Whether a task id (``t<tenant>-...``) lands on a shard that ``master`` serves."""
    dying = {
        tenant
        for tenant in range(TENANTS)
        if cluster.master_of(f"fq:{{{namespace}:{shard_index(f't{tenant}', SHARDS)}}}:ring")
        is master
    }
    return lambda task_id: int(task_id.split("-")[0][1:]) in dying


def cluster_scenario(name: str, seconds: float) -> None:
    with LocalCluster() as cluster:
        slot_zero = cluster.master_of("{06S}")
        replica = cluster.replica_of(slot_zero)
        if name.startswith("shards"):
            namespace = f"jobs-{uuid.uuid4().hex[:6]}"
            setup = Setup(
                cluster.url,
                lambda: ShardedQueue(cluster.url, namespace, shards=SHARDS),
                ["--namespace", namespace, "--shards", str(SHARDS)],
                slot_zero, replica, tenant_on(cluster, namespace, slot_zero),
                1 if name.endswith("r1") else 0,
            )  # fmt: skip
        else:
            namespace = next(
                candidate for n in range(10_000)
                if cluster.master_of(f"fq:{{{(candidate := f'jobs{n}')}}}:ring") is slot_zero
            )  # fmt: skip
            setup = Setup(cluster.url, lambda: FairQueue(cluster.url, namespace),
                          ["--namespace", namespace], slot_zero, replica,
                          lambda _task_id: True, 0)  # fmt: skip
        drill(name, setup, seconds, lambda: cluster.kill(slot_zero))


def sentinel_scenario(name: str, seconds: float) -> None:
    from fairque.servers.local_sentinel import LocalSentinel

    with LocalSentinel() as sentinels:
        namespace = "jobs"
        setup = Setup(sentinels.url, lambda: FairQueue(sentinels.url, namespace),
                      ["--namespace", namespace], sentinels.primary, sentinels.replica,
                      lambda _task_id: True, 1)  # fmt: skip
        drill(name, setup, seconds, lambda: sentinels.kill(sentinels.primary))


SCENARIOS: dict[str, Callable[[str, float], Any]] = {
    "shards-r1": cluster_scenario,
    "shards-r0": cluster_scenario,
    "slot0-r0": cluster_scenario,
    "sentinel-r1": sentinel_scenario,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--seconds", type=float, default=12.0, help="after the kill")
    options = parser.parse_args()
    for name in options.scenario or list(SCENARIOS):
        SCENARIOS[name](name, options.seconds)


if __name__ == "__main__":
    main()
