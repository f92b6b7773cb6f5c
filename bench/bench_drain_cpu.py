"""A worker's own CPU per task: one in-process worker drains queued tasks.

    uv run python bench/bench_drain_cpu.py [--tasks 10000] [--repeat 3] [--redis-server] [--profile]

Pushes ``--tasks`` tasks of 10 tenants onto a throwaway server (the embedded Valkey, or
Debian's ``redis-server`` with ``--redis-server``, as the peers' harness uses), then runs
a :class:`~fairque.worker.Worker` in this process (concurrency 10, the default; uvloop
where installed, as ``fairque worker`` runs) until every task has finished; each task
makes one ``INCR`` of its own through a plain ``redis.asyncio`` client, as real tasks make
calls of their own. Prints, per run, the tasks per second and this process's CPU time
per task (``time.process_time()``: the worker's share only, the server runs in another
process), then the medians; asserts nothing. The CPU per task is the steadier figure on a
shared machine. ``--profile`` also prints where the last run's CPU went (cProfile, own
time). To compare two versions of the code, run each in turns (``PYTHONPATH`` set to the
other checkout for one of them).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import redis
import redis.asyncio as aredis

try:
    from uvloop import run as run_loop  # as `fairque worker` runs
except ImportError:  # pragma: no cover - where uvloop is not installed
    from asyncio import run as run_loop  # type: ignore[assignment]

from fairque import FairQueue
from fairque.servers.embedded import LocalServer, free_port
from fairque.worker import Registry, Worker, WorkerConfig, task

TENANTS = 10
functions = Registry()
counter: aredis.Redis | None = None  # the tasks' own client, made by the first


@task(into=functions, name="count")
async def count_one(url: str) -> None:
    """One call of its own, as a real task makes."""
    global counter  # noqa: PLW0603 - one client for the run's tasks
    if counter is None:
        counter = aredis.Redis.from_url(url)
    await counter.incr("bench:done")


def drain(
    url: str, namespace: str, tasks: int, profile: cProfile.Profile | None
) -> tuple[float, float]:
    """Tasks per second and CPU seconds per task of one drain of ``tasks`` queued tasks."""
    with FairQueue(url, namespace) as queue:
        for first in range(0, tasks, 1000):
            batch = range(first, min(first + 1000, tasks))
            queue.push_many([count_one.build(user_id=f"t{n % TENANTS}", args=[url]) for n in batch])
    worker = Worker(WorkerConfig(redis_url=url, namespace=namespace), functions)

    async def run() -> None:
        global counter  # noqa: PLW0603 - the tasks' client belongs to this run's loop
        counter = None
        running = asyncio.ensure_future(worker.run_async())
        while worker.finished < tasks:
            if running.done():
                running.result()  # the worker stopped early: say why
            await asyncio.sleep(0.005)
        worker.stop()
        await running
        if counter is not None:
            await counter.aclose()

    began, cpu = time.perf_counter(), time.process_time()
    if profile is not None:
        profile.enable()
    run_loop(run())
    if profile is not None:
        profile.disable()
    return tasks / (time.perf_counter() - began), (time.process_time() - cpu) / tasks


@contextmanager
def throwaway_server(debian: bool) -> Iterator[str]:
    """The URL of a server started for the run (Debian's redis-server, or the embedded
    Valkey), stopped by its PID at the end."""
    if not debian:
        with LocalServer() as server:
            yield server.url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        print("bench_drain_cpu: redis-server is not installed", file=sys.stderr)
        raise SystemExit(2)
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        arguments = ["--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                     "no", "--dir", folder]  # fmt: skip
        process = subprocess.Popen([binary, *arguments], stdout=subprocess.DEVNULL)
        url = f"redis://127.0.0.1:{port}/0"
        try:
            probe = redis.Redis.from_url(url)
            deadline = time.monotonic() + 30
            while True:
                try:
                    probe.ping()
                    break
                except redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            probe.close()
            yield url
        finally:
            process.terminate()
            process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--redis-server", action="store_true", help="Debian's redis-server")
    parser.add_argument("--profile", action="store_true")
    options = parser.parse_args()
    profile = cProfile.Profile(time.process_time) if options.profile else None
    rates, cpus = [], []
    with throwaway_server(options.redis_server) as url:
        for run in range(options.repeat):
            last = profile if run == options.repeat - 1 else None
            rate, cpu = drain(url, f"drain-{run}", options.tasks, last)
            rates.append(rate)
            cpus.append(cpu)
            print(f"run {run + 1}: {rate:,.0f} tasks/s, worker CPU {cpu * 1e6:.0f} us a task",
                  flush=True)  # fmt: skip
    print(f"median of {options.repeat}: {statistics.median(rates):,.0f} tasks/s, worker CPU "
          f"{statistics.median(cpus) * 1e6:.0f} us a task")  # fmt: skip
    if profile is not None:
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
