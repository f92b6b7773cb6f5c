"""What a failover costs, as a user would see it: a producer pushing to 20 tenants and two
``fairque worker`` processes, while the master of the queue's data is killed.

    uv run python bench/bench_failover.py [--scenario NAME ...] [--seconds 12]
        [--task-ms 50] [--show-logs]

Scenarios (all by default):

- ``shards-r1``: a local cluster of 3 masters with a replica each (node timeout 2 s), a
  queue of 6 shards over all of them, pushes with ``replicas=1``; the master of slot 0
  is killed (the node redis-py's cluster client asks where an FCALL goes).
- ``shards-r0``: the same with ``replicas=0`` (acknowledged at once).
- ``slot0-r0``: one namespace on the master of slot 0, ``replicas=0``.
- ``sentinel-r1``: a primary, a replica and 3 sentinels, through a ``redis+sentinel://``
  URL, ``replicas=1``; the primary is killed.

The dying master's replica is cut off for the last half second before the kill (its link
to the master dropped, and the process stopped before it makes a new one), so that the
crash loses what a real crash loses: writes the replica never received. The producer
pushes one task per call with its own id, a push every 2 ms at most; each task sleeps
``--task-ms`` (so that the workers, 10 tasks at a time each, fall behind and the crash
finds a backlog), then appends its id to a file.

Printed per scenario: pushed, acknowledged, ran, lost (acknowledged and never run),
duplicated (ran more than once); the time from the kill to the replica's promotion (the
failover's own time), to the first push made (with ``replicas=1``, confirmed or not: a
promoted replica has no replica of its own) and to the first run, after the promotion,
of a task of the killed master's data; the workers' exit statuses on SIGTERM and how many lines they
wrote to stderr. Asserts nothing; targets loopback only; stops every process it started.
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

import redis

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
        time.sleep(float(os.environ["TASK_SECONDS"]))  # slower than the producer: a backlog
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
    unconfirmed: dict[str, float] = field(default_factory=dict)  # made, too few replicas had it
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
                pushes.unconfirmed[task_id] = time.time()
            except Exception:
                pushes.failed += 1
                time.sleep(0.02)
            time.sleep(0.002)  # a little faster than the workers, not a flood


def ran_log(path: Path) -> list[tuple[float, str]]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        when, _, task_id = line.partition(" ")
        rows.append((float(when), task_id))
    return rows


@contextmanager
def workers(
    setup: Setup, folder: Path, log: Path, task_seconds: float
) -> Iterator[list[subprocess.Popen[str]]]:
    env = {**os.environ, "RAN_LOG": str(log), "PYTHONPATH": str(folder),
           "TASK_SECONDS": str(task_seconds)}  # fmt: skip
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


def cut_off(replica: LocalServer) -> int:
    """Keeps ``replica`` from receiving its master's writes from now on: it drops its
    link to the master, and is stopped (SIGSTOP) before it can make a new one. (Stopped
    alone, it would still get them: the kernel takes what the master sends into the
    stopped process's socket buffer.) Returns its pid, for the SIGCONT."""
    assert replica.process is not None
    with redis.Redis(host="127.0.0.1", port=replica.port, socket_timeout=5) as conn:
        conn.execute_command("CLIENT", "KILL", "TYPE", "master")
    os.kill(replica.process.pid, signal.SIGSTOP)
    return replica.process.pid


def drained(ran: Callable[[], set[str]], acknowledged: set[str]) -> None:
    """Waits until every acknowledged task ran, or none has run for 10 s (what is left is
    lost), 5 minutes at most."""
    deadline = time.monotonic() + 300
    count, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        done = ran()
        if acknowledged <= done:
            return
        if len(done) != count:
            count, since = len(done), time.monotonic()
        elif time.monotonic() - since > 10:
            return
        time.sleep(0.2)


def promotion(replica: LocalServer, timeout: float) -> float | None:
    """When ``replica`` says it is a master (asked every 10 ms), None if not within
    ``timeout`` seconds: the failover's own time, which the clients cannot shorten."""
    deadline = time.monotonic() + timeout
    with redis.Redis(host="127.0.0.1", port=replica.port, socket_timeout=1) as conn:
        while time.monotonic() < deadline:
            if conn.execute_command("ROLE")[0] == b"master":
                return time.time()
            time.sleep(0.01)
    return None


def wait_until(probe: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return True
        time.sleep(0.05)
    return False


def drill(name: str, setup: Setup, options: argparse.Namespace, kill: Callable[[], None]) -> None:
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        (folder / "failover_tasks.py").write_text(TASKS_MODULE)
        log = folder / "ran.log"
        pushes = Pushes()
        stop = threading.Event()
        with workers(setup, folder, log, options.task_ms / 1000) as processes:
            producer = threading.Thread(target=produce, args=(setup, pushes, stop))
            producer.start()
            wait_until(lambda: len(pushes.acknowledged) >= 300, 60)
            stopped = cut_off(setup.replica)
            time.sleep(0.5)  # what the master takes now, no replica will have
            killed_at = time.time()
            kill()
            os.kill(stopped, signal.SIGCONT)
            promoted_at = promotion(setup.replica, options.seconds)
            time.sleep(max(0.0, killed_at + options.seconds - time.time()))
            stop.set()
            producer.join()
            acknowledged = set(pushes.acknowledged)
            drained(lambda: {task_id for _, task_id in ran_log(log)}, acknowledged)
            for process in processes:
                process.send_signal(signal.SIGTERM)
            statuses, stderr_lines, tracebacks = [], 0, 0
            for process in processes:
                _, err = process.communicate(timeout=60)
                statuses.append(process.returncode)
                stderr_lines += len(err.splitlines())
                tracebacks += err.count("Traceback")
                if options.show_logs:
                    print(err, file=sys.stderr)
        runs = ran_log(log)
    counts = Counter(task_id for _, task_id in runs)
    lost = [task_id for task_id in acknowledged if not counts[task_id]]
    answered = {**pushes.acknowledged, **pushes.unconfirmed}  # a push made, confirmed or not
    first_push = min(
        (at for task_id, at in answered.items() if at > killed_at and setup.on_dying(task_id)),
        default=None,
    )
    # A task of the killed master's data that ran after the promotion was taken from the
    # promoted replica: the workers had found it (those running at the kill ended at once).
    resumed = promoted_at or killed_at
    first_run = min(
        (at for at, task_id in runs if at > resumed and setup.on_dying(task_id)), default=None
    )

    def after(at: float | None) -> str:
        return "never" if at is None else f"{at - killed_at:.1f} s"

    print(
        f"{name}: pushed {pushes.tried}, acknowledged {len(acknowledged)}, unconfirmed "
        f"{len(pushes.unconfirmed)}, ran {len(counts)}, lost {len(lost)}, duplicated "
        f"{sum(1 for c in counts.values() if c > 1)}, kill -> replica promoted "
        f"{after(promoted_at)}, first push {after(first_push)}, first run "
        f"{after(first_run)}; workers' exit on SIGTERM {statuses}, stderr "
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


def cluster_scenario(name: str, options: argparse.Namespace) -> None:
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
        drill(name, setup, options, lambda: cluster.kill(slot_zero))


def sentinel_scenario(name: str, options: argparse.Namespace) -> None:
    from fairque.servers.local_sentinel import LocalSentinel

    with LocalSentinel() as sentinels:
        namespace = "jobs"
        setup = Setup(sentinels.url, lambda: FairQueue(sentinels.url, namespace),
                      ["--namespace", namespace], sentinels.primary, sentinels.replica,
                      lambda _task_id: True, 1)  # fmt: skip
        drill(name, setup, options, lambda: sentinels.kill(sentinels.primary))


SCENARIOS: dict[str, Callable[[str, argparse.Namespace], Any]] = {
    "shards-r1": cluster_scenario,
    "shards-r0": cluster_scenario,
    "slot0-r0": cluster_scenario,
    "sentinel-r1": sentinel_scenario,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--seconds", type=float, default=12.0, help="after the kill")
    parser.add_argument("--show-logs", action="store_true", help="the workers' stderr")
    parser.add_argument("--task-ms", type=float, default=50.0, help="each task's run")
    options = parser.parse_args()
    for name in options.scenario or list(SCENARIOS):
        SCENARIOS[name](name, options)


if __name__ == "__main__":
    main()
