"""Storage (seed 004) throughput on a throwaway server: get_task + done_task, tasks per
second, with batch sizes 1, 10 and 100; and put_tasks in batches of 1,000.

    uv run python bench/bench_storage.py [--redis-server] [--repeat 3] [--memory]

Prints figures (best of --repeat runs) for the embedded Valkey and, beside it, Debian's
tarantool (WAL on, when the binary is installed; --no-tarantool skips it); asserts
nothing. Every run uses a fresh namespace on a server started for the benchmark, 4
numbered queues and 64-byte payloads; one client thread, so each batch is one get and
one done round trip.
"""

from __future__ import annotations

import argparse
import shutil
import time
import uuid
from collections.abc import Callable

from fairque.servers.embedded import LocalServer
from fairque.servers.local_tarantool import LocalTarantool, find_binary
from fairque.storage import MemoryStorage, PutTaskRequest, RedisStorage, Storage, TarantoolStorage

QUEUES = 4
DATA = bytes(64)
PUT_BATCH = 1_000
SCENARIOS = [(1, 5_000), (10, 40_000), (100, 100_000)]  # (batch size, tasks)


def fill(storage: Storage, tasks: int) -> float:
    """Seconds to put ``tasks`` tasks in batches of PUT_BATCH."""
    started = time.perf_counter()
    for first in range(0, tasks, PUT_BATCH):
        count = min(PUT_BATCH, tasks - first)
        storage.put_tasks([PutTaskRequest((first + i) % QUEUES, DATA) for i in range(count)])
    return time.perf_counter() - started


def drain(storage: Storage, batch: int) -> int:
    """Takes every task, round robin over the queues, and marks each batch done."""
    done, empty = 0, 0
    queue = 0
    while empty < QUEUES:
        taken = storage.get_task(queue, batch)
        queue = (queue + 1) % QUEUES
        if not taken:
            empty += 1
            continue
        empty = 0
        storage.done_task([task.id for task in taken])
        done += len(taken)
    return done


def measure(make: Callable[[], Storage], batch: int, tasks: int) -> tuple[float, float]:
    """(put seconds, get+done seconds) of one run in a fresh storage."""
    storage = make()
    put_seconds = fill(storage, tasks)
    started = time.perf_counter()
    drained = drain(storage, batch)
    elapsed = time.perf_counter() - started
    assert drained == tasks, (drained, tasks)  # a broken run must not print a figure
    if isinstance(storage, RedisStorage):
        storage.executor.client.flushdb()  # a throwaway server: keep every run's keyspace alike
        storage.close()
    if isinstance(storage, TarantoolStorage):
        storage.close()  # every task was done: its namespace holds nothing but an id counter
    return put_seconds, elapsed


def bench(label: str, make: Callable[[], Storage], repeat: int) -> None:
    print(f"\n{label}, best of {repeat}")
    print(f"{'scenario':<32} {'tasks':>8} {'seconds':>8} {'tasks/s':>10}")
    puts = []
    for batch, tasks in SCENARIOS:
        runs = [measure(make, batch, tasks) for _ in range(repeat)]
        puts += [tasks / put for put, _ in runs]
        best = min(seconds for _, seconds in runs)
        print(f"{f'get+done, batch {batch}':<32} {tasks:>8,} {best:>8.2f} {tasks / best:>10,.0f}")
    print(f"{f'put, batches of {PUT_BATCH:,} (best)':<32} {'':>8} {'':>8} {max(puts):>10,.0f}")


def on_server(label: str, binary: str | None, repeat: int) -> None:
    with LocalServer(binary) as server:
        info = RedisStorage(server.url, "bench-info")
        details = info.executor.client.info("server")
        info.close()
        version = details.get("valkey_version", details["redis_version"])
        name = "valkey" if "valkey_version" in details else "redis"

        def make() -> Storage:
            return RedisStorage(server.url, f"bench-{uuid.uuid4().hex[:8]}")

        bench(f"{label} ({name} {version})", make, repeat)


def on_tarantool(binary: str, repeat: int) -> None:
    with LocalTarantool(binary) as server:
        version = server.admin("return box.info.version").split("\n")[1].removeprefix("- ")

        def make() -> Storage:
            return TarantoolStorage(server.url, f"bench-{uuid.uuid4().hex[:8]}")

        bench(f"Debian tarantool ({version}, WAL on)", make, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-server", action="store_true", help="also run on redis-server")
    parser.add_argument("--memory", action="store_true", help="also run the in-memory storage")
    parser.add_argument("--repeat", type=int, default=3, help="runs per scenario (best counts)")
    parser.add_argument("--no-tarantool", action="store_true", help="skip Debian's tarantool")
    options = parser.parse_args()
    on_server("embedded Valkey", None, options.repeat)
    if not options.no_tarantool and (tarantool := find_binary()):
        on_tarantool(tarantool, options.repeat)
    if options.redis_server and (binary := shutil.which("redis-server")):
        on_server("Debian redis-server", binary, options.repeat)
    if options.memory:
        bench("in-memory storage", MemoryStorage, options.repeat)


if __name__ == "__main__":
    main()
