"""Throughput on a local cluster (3 masters, a replica each): one shard against three.

    uv run python bench/bench_cluster.py [--redis-server] [--tasks 60000] [--processes 2]

Batched push (push_many of 1,000 tasks over 50 tenants) and pop+finish (pop count 100,
finish_many) by --processes client processes, tasks per second, on a queue of one shard
(one namespace: one master does all the work) and of three shards whose namespaces sit on
three different masters; then what WAIT for one replica costs a pushing process. Prints
figures; asserts nothing.

Clients and six server processes share this machine's cores, so the clients' rate is
capped by the machine, not by the servers. The "ceiling" column is therefore measured
too: tasks per CPU second used by the busiest master (INFO cpu), i.e. the rate at which
that master would be saturated if it had a core to itself. With one shard, one master
does all the work; with three, each does a third, and the ceiling rises accordingly.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import time
import uuid
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier
from typing import Any

from fairque import FairQueue, Queue, Task
from fairque.engine.shards import shard_namespaces
from fairque.queue.client import open_queue
from fairque.servers.local_cluster import LocalCluster

TENANTS = 50
PUSH_BATCH = 1000
POP_BATCH = 100


def push(queue: Queue, count: int) -> None:
    for start in range(0, count, PUSH_BATCH):
        queue.push_many([Task(user_id=f"tenant-{i % TENANTS}", payload={"n": i})
                         for i in range(start, start + PUSH_BATCH)])  # fmt: skip


def drain(queue: Queue, count: int) -> None:
    done = 0
    while done < count and (leased := queue.pop(count=POP_BATCH)):
        queue.finish_many(leased)
        done += len(leased)


def client(url: str, namespace: str, shards: int, *, work: str, count: int, go: Barrier) -> None:
    queue = open_queue(url, namespace, shards)
    queue.stats()  # connected, slots known, scripts loaded: not part of the timing
    go.wait()  # every process starts together
    (push if work == "push" else drain)(queue, count)
    queue.close()


def timed(url: str, namespace: str, shards: int, *, work: str, tasks: int, processes: int) -> float:
    """Seconds for ``processes`` client processes to do ``work`` on ``tasks`` tasks."""
    spawn = multiprocessing.get_context("spawn")
    go = spawn.Barrier(processes + 1)
    share = tasks // processes
    jobs = {"work": work, "count": share, "go": go}
    workers = [spawn.Process(target=client, args=(url, namespace, shards), kwargs=jobs)
               for _ in range(processes)]  # fmt: skip
    for worker in workers:
        worker.start()
    go.wait(timeout=60)
    started = time.perf_counter()
    for worker in workers:
        worker.join()
    return time.perf_counter() - started


def masters_cpu(cluster: LocalCluster) -> dict[int, float]:
    """CPU seconds each master has used so far (INFO cpu), by port."""
    used = {}
    for node in cluster.nodes:
        with cluster.client(node) as conn:
            if conn.execute_command("ROLE")[0] == b"master":
                info = conn.info("cpu")
                used[node.port] = float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    return used


@dataclass(frozen=True)
class Figures:
    rate: float  # tasks/s the clients reached
    ceiling: float  # tasks per CPU second of the busiest master: the server-bound limit


def measured(cluster: LocalCluster, namespace: str, shards: int, **runs: Any) -> Figures:
    before = masters_cpu(cluster)
    seconds = timed(cluster.url, namespace, shards, **runs)
    after = masters_cpu(cluster)
    busiest = max(after[port] - before[port] for port in after)
    return Figures(runs["tasks"] / seconds, runs["tasks"] / busiest)


def spread_namespace(cluster: LocalCluster, shards: int) -> str:
    """A namespace whose ``shards`` shard namespaces sit on as many different masters."""
    while True:
        namespace = f"bench-{uuid.uuid4().hex[:8]}"
        names = shard_namespaces(namespace, shards) if shards > 1 else [namespace]
        masters = {cluster.master_of(f"fq:{{{name}}}:ring").port for name in names}
        if len(masters) == shards:
            return namespace


def wait_cost(url: str, namespace: str) -> None:
    """Push rates of one process with and without WAIT for one replica."""
    print(f"{'one process, push':<30} {'replicas=0 tasks/s':>20} {'replicas=1 tasks/s':>20}")
    with FairQueue(url, namespace) as queue:
        for batch, count in ((1, 2_000), (1000, 20_000)):
            rates = []
            for replicas in (0, 1):
                started = time.perf_counter()
                for start in range(0, count, batch):
                    tasks = [Task(user_id=f"tenant-{i % TENANTS}", payload={"n": i})
                             for i in range(start, start + batch)]  # fmt: skip
                    queue.push_many(tasks, replicas=replicas)
                rates.append(count / (time.perf_counter() - started))
            print(f"{f'batches of {batch:,}':<30} {rates[0]:>20,.0f} {rates[1]:>20,.0f}")


def bench(label: str, binary: str | None, tasks: int, processes: int) -> None:
    with LocalCluster(binary) as cluster:
        print(f"\n{label}: 3 masters + 3 replicas, {processes} client processes, {tasks:,} tasks")
        print(
            f"{'shards':<8} {'push /s':>10} {'ceiling':>10} {'pop+finish /s':>14} {'ceiling':>10}"
        )
        for shards in (1, 3):
            namespace = spread_namespace(cluster, shards)
            runs = {"tasks": tasks, "processes": processes}
            push = measured(cluster, namespace, shards, work="push", **runs)
            drain = measured(cluster, namespace, shards, work="drain", **runs)
            print(f"{shards:<8} {push.rate:>10,.0f} {push.ceiling:>10,.0f} "
                  f"{drain.rate:>14,.0f} {drain.ceiling:>10,.0f}")  # fmt: skip
        wait_cost(cluster.url, spread_namespace(cluster, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-server", action="store_true", help="also run on redis-server")
    parser.add_argument("--tasks", type=int, default=60_000, help="tasks per scenario")
    parser.add_argument("--processes", type=int, default=2, help="client processes")
    options = parser.parse_args()
    bench("Valkey Cluster", None, options.tasks, options.processes)
    if options.redis_server and (binary := shutil.which("redis-server")):
        bench("Redis Cluster", binary, options.tasks, options.processes)


if __name__ == "__main__":
    main()
