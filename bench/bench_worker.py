"""Worker figures on a throwaway embedded Valkey, with real ``fairque worker`` processes.

    uv run python bench/bench_worker.py [--tasks 20000] [--repeat 2]

Prints, never asserts: drain rate of queued tasks with 1 and 2 worker processes (no-op
tasks, and tasks that make one Redis call of their own, as real tasks do; at a
concurrency of 200, and the latter also at the default of 10),
idle pickup latency (a task pushed every 20 ms to an idle worker) beside this machine's
idle round trip (a PING after a 20 ms pause), the time to submit and
run a 1,000-task fan-out/fan-in pipeline, and the fairness
scenario (tenant "big" pushes 5,000 tasks, then 50 small tenants push 10 each: where in
the order of execution do the small ones run).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from fairque import FairQueue, Task
from fairque.servers.embedded import LocalServer

BENCH = Path(__file__).parent


@contextmanager
def workers(url: str, namespace: str, count: int, concurrency: int) -> Iterator[None]:
    """Runs ``count`` worker processes until the block ends, then stops them (SIGTERM)."""
    env = {**os.environ, "PYTHONPATH": str(BENCH), "FAIRQUE_REDIS_URL": url,
           "FAIRQUE_NAMESPACE": namespace, "FAIRQUE_CONCURRENCY": str(concurrency)}  # fmt: skip
    command = [sys.executable, "-c", "from fairque.cli import main; main()", "worker",
               "--tasks", "bench_tasks"]  # fmt: skip
    started = [subprocess.Popen(command, env=env) for _ in range(count)]
    queue = FairQueue(url, namespace)
    try:
        wait(lambda: listeners(queue) == count, timeout=60)
        yield
    finally:
        for process in started:
            process.send_signal(signal.SIGTERM)
        for process in started:
            process.wait(timeout=30)
        queue.close()


def listeners(queue: FairQueue) -> int:
    """Workers waiting for work: blocked in their pop (the benchmark's server is its own)."""
    return sum(client["cmd"] == "blpop" for client in queue.redis.client_list())


def wait(probe: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not probe():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark condition not met")
        time.sleep(0.005)


def finished(queue: FairQueue) -> int:
    """The namespace's finished counter, read alone: ``stats()`` also reads the fairness
    view (about 1.5 ms of server time), which polled every 5 ms would slow the drain."""
    return int(queue.redis.hget(queue.namespace.key("stats"), "finished") or 0)


def drain(
    url: str, tasks: int, processes: int, name: str = "noop", concurrency: int = 200
) -> float:
    """Tasks per second from the first push until every task has finished."""
    namespace = f"drain-{uuid.uuid4().hex[:8]}"
    queue = FairQueue(url, namespace)
    with workers(url, namespace, processes, concurrency=concurrency):
        started = time.perf_counter()
        for first in range(0, tasks, 1000):
            batch = range(first, min(first + 1000, tasks))
            queue.push_many([Task(user_id=f"t{i % 50}", name=name) for i in batch])
        wait(lambda: finished(queue) >= tasks, timeout=600)
        elapsed = time.perf_counter() - started
    queue.close()
    return tasks / elapsed


def pickup_latency(url: str, count: int = 500) -> tuple[list[float], dict[str, float]]:
    """Milliseconds from push to start, for tasks pushed 20 ms apart to an idle worker,
    sorted; and the median of each hop, read from the task's record (the push script's
    clock is its ``created_at``, the pop script's its ``leased_at``; one machine, one
    wall clock)."""
    namespace = f"latency-{uuid.uuid4().hex[:8]}"
    queue = FairQueue(url, namespace)
    pushed: dict[str, float] = {}
    with workers(url, namespace, 1, concurrency=10):
        for _ in range(count):
            pushed_at = time.time()
            task_id = queue.push(Task(user_id="u", name="started_at", keep_result=True))
            pushed[task_id] = pushed_at
            time.sleep(0.02)  # the pacing of the scenario, not a wait for state
        wait(lambda: finished(queue) >= count, timeout=60)
    latencies = []
    hops: dict[str, list[float]] = {"push call -> push script": [],
                                    "push script -> pop script": [],
                                    "pop script -> task running": []}  # fmt: skip
    for task_id, pushed_at in pushed.items():
        info = queue.get(task_id)
        assert info is not None
        assert info.leased_at is not None
        latencies.append((info.result - pushed_at) * 1000)
        for hop, (start, end) in zip(hops.values(), ((pushed_at, info.created_at),
                                     (info.created_at, info.leased_at),
                                     (info.leased_at, info.result)), strict=True):  # fmt: skip
            hop.append((end - start) * 1000)
    queue.close()
    return sorted(latencies), {hop: statistics.median(times) for hop, times in hops.items()}


def idle_round_trips(url: str, count: int = 200) -> list[float]:
    """Milliseconds of a bare PING after a 20 ms pause, sorted: the floor of each hop of
    the pickup, where client and server have both gone idle (a VM pays to wake them)."""
    client = redis.Redis.from_url(url)
    times = []
    for _ in range(count):
        time.sleep(0.02)  # the pickup scenario's pacing, not a wait for state
        started = time.perf_counter()
        client.ping()
        times.append((time.perf_counter() - started) * 1000)
    client.close()
    return sorted(times)


def fairness(url: str, processes: int = 2) -> tuple[int, float, int]:
    """(index of the last small task, mean index of small tasks, total) in start order."""
    namespace = f"fair-{uuid.uuid4().hex[:8]}"
    queue = FairQueue(url, namespace)
    ids = queue.push_many([Task(user_id="big", name="noop") for _ in range(5000)])
    for tenant in range(50):
        ids += queue.push_many([Task(user_id=f"small{tenant}", name="noop") for _ in range(10)])
    with workers(url, namespace, processes, concurrency=100):
        wait(lambda: finished(queue) >= len(ids), timeout=600)
    order = []
    for task_id in ids:
        info = queue.get(task_id)
        assert info is not None
        assert info.lease_token is not None
        order.append((int(info.lease_token), info.user_id))
    order.sort()
    small = [index for index, (_, tenant) in enumerate(order, 1) if tenant != "big"]
    queue.close()
    return max(small), statistics.mean(small), len(order)


def fan_out_fan_in(url: str, width: int = 998, processes: int = 2) -> tuple[float, float]:
    """(seconds to submit, seconds to run) a pipeline: prepare -> ``width`` tasks -> combine."""
    namespace = f"pipeline-{uuid.uuid4().hex[:8]}"
    queue = FairQueue(url, namespace)
    middle = [f"part-{n}" for n in range(width)]
    tasks = [Task(user_id="u", task_id="prepare", name="noop")]
    tasks += [
        Task(user_id="u", task_id=part, name="noop", depends_on=("prepare",)) for part in middle
    ]
    tasks.append(Task(user_id="u", task_id="combine", name="noop", depends_on=tuple(middle)))
    with workers(url, namespace, processes, concurrency=100):
        started = time.perf_counter()
        queue.push_many(tasks)
        submitted = time.perf_counter()
        wait(lambda: finished(queue) >= len(tasks), timeout=120)
        done = time.perf_counter()
    queue.close()
    return submitted - started, done - submitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=2, help="drain runs (best counts)")
    options = parser.parse_args()
    with LocalServer() as server:
        for name, what in (("noop", "no-op tasks"), ("one_call", "tasks making one Redis call")):
            for processes in (1, 2):
                best = max(
                    drain(server.url, options.tasks, processes, name) for _ in range(options.repeat)
                )
                print(f"drain {options.tasks:,} {what}, {processes} worker process(es): "
                      f"{best:,.0f} tasks/s")  # fmt: skip
        for processes in (1, 2):  # a worker's default concurrency: bound by round trips
            best = max(
                drain(server.url, options.tasks, processes, "one_call", concurrency=10)
                for _ in range(options.repeat)
            )
            print(f"the same at the default concurrency of 10, {processes} worker "
                  f"process(es): {best:,.0f} tasks/s")  # fmt: skip
        latencies, hops = pickup_latency(server.url)
        p50, p99 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99) - 1]
        print(
            f"idle pickup latency over {len(latencies)} tasks: p50 {p50:.2f} ms, p99 {p99:.2f} ms"
        )
        hop_times = ", ".join(f"{hop} {ms:.2f} ms" for hop, ms in hops.items())
        print(f"  medians of its hops: {hop_times}")
        floor = idle_round_trips(server.url)
        print(f"  this machine's idle round trip (PING after a 20 ms pause): p50 "
              f"{floor[len(floor) // 2]:.2f} ms; pickup pays two such hops")  # fmt: skip
        submit, run = fan_out_fan_in(server.url)
        print(f"fan-out/fan-in pipeline of 1,000 tasks, 2 worker processes: submitted in "
              f"{submit * 1000:.1f} ms, ran in {run * 1000:.0f} ms")  # fmt: skip
        last, mean, total = fairness(server.url)
        print(f"fairness: last small task ran {last} of {total} (ideal round robin 510, "
              f"FIFO 5,500); small tasks' mean position {mean:.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
