"""The server's instructions per task for push, pop and finish, counted by valgrind.

    uv run python bench/bench_instructions.py [--tenants 50] [--redis-server]

Runs a throwaway server under ``valgrind --tool=callgrind`` (Debian's valgrind) and
counts the instructions it executes for each operation: the scripts, the commands they
make, the protocol and the replies, not the kernel's share of the network. Unlike a
timing on a shared VM, the count is the same from run to run within about 3% (the
clock's digits and Lua's garbage collector vary), so an engine change can be judged by
one run before and one after. Prints instructions per task for named tasks (a worker
runs a task by its name) spread over ``--tenants`` tenants, in batches (push 1,000 per
call, pop and finish 100 per call) and one task per call (pops without names, and as a
worker makes them, naming its task names), a call's fixed cost (a pop
that finds nothing, a finish of no task), pop + finish in a worker's cycle (pop 100 or
10, finish them, again; and with each finish in the next pop's call, as a worker sends
them; and one task a call naming its task names, as a worker at concurrency 1 sends
them), and beside them the same batches and single calls made of only the
commands a task's life needs (``bench_floor.py``'s functions); asserts nothing. A
server under valgrind runs ~50x slower: the figures are counts, never rates.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import redis
from bench_floor import FLOOR_LIBRARY, floor_finish, floor_pop, floor_push
from callgrind import CountedServer

from fairque import FairQueue, Task
from fairque.queue.models import LeasedTask
from fairque.servers.embedded import free_port, valkey_binary

BATCH_TASKS = 4_000
SINGLE_TASKS = 300


def task(i: int, tenants: int) -> Task:
    return Task(user_id=f"tenant-{i % tenants}", name="send_email", payload={"n": i})


def batches(server: CountedServer, tenants: int) -> dict[str, float]:
    queue = FairQueue(server.url, "batches")
    leased: list[list[LeasedTask]] = []

    def push() -> None:
        for first in range(0, BATCH_TASKS, 1000):
            queue.push_many([task(i, tenants) for i in range(first, first + 1000)])

    def pop() -> None:
        leased.extend(queue.pop(count=100, worker_id="bench") for _ in range(BATCH_TASKS // 100))

    def finish() -> None:
        for batch in leased:
            queue.finish_many(batch, [None] * len(batch))

    figures = {name: server.measure(name, work) for name, work in
               (("push", push), ("pop", pop), ("finish", finish))}  # fmt: skip
    assert sum(map(len, leased)) == BATCH_TASKS, "every task pushed was popped"
    queue.close()
    return {name: count / BATCH_TASKS for name, count in figures.items()}


def cycles(
    server: CountedServer,
    tenants: int,
    count: int,
    combined: bool = False,
    *,
    names: list[str] | None = None,
    tasks: int = BATCH_TASKS,
) -> float:
    """Pop + finish per task in a worker's cycle: pop ``count``, finish them, again. Unlike
    the batches above, at most ``count`` leases are held at once, as with a worker. With
    ``combined``, each cycle's finish rides in the next pop (``finish_and_pop``), as a
    worker sends them: one call per cycle instead of two (the last finishes the last
    tasks, and its pop finds nothing). With ``names``, the pops name the task names, as a
    worker's do; ``tasks`` are pushed and drained."""
    namespace = f"cycles_{count}_combined" if combined else f"cycles_{count}"
    if names is not None:
        namespace += "_named"
    queue = FairQueue(server.url, namespace)
    for first in range(0, tasks, 1000):
        queue.push_many([task(i, tenants) for i in range(first, min(first + 1000, tasks))])
    done = 0

    def turns() -> None:
        nonlocal done
        for _ in range(tasks // count):
            leased = queue.pop(count=count, worker_id="bench", names=names)
            queue.finish_many(leased, [None] * len(leased))
            done += len(leased)

    def combined_turns() -> None:
        nonlocal done
        leased = queue.pop(count=count, worker_id="bench", names=names)
        while leased:
            _, more = queue.finish_and_pop(leased, count=count, worker_id="bench", names=names)
            done += len(leased)
            leased = more

    count = server.measure(namespace, combined_turns if combined else turns)
    assert done == tasks, "every task pushed was popped"
    queue.close()
    return count / tasks


def one_per_call(
    server: CountedServer, tenants: int, namespace: str = "single", names: list[str] | None = None
) -> dict[str, float]:
    """One task per call; with ``names``, pops as a worker makes them (its task names)."""
    queue = FairQueue(server.url, namespace)
    leased: list[LeasedTask] = []

    def push() -> None:
        for i in range(SINGLE_TASKS):
            queue.push(task(i, tenants))

    def pop() -> None:
        for _ in range(SINGLE_TASKS):
            leased.extend(queue.pop(count=1, worker_id="bench", names=names))

    def finish() -> None:
        for one in leased:
            queue.finish(one)

    figures = {name: server.measure(f"{namespace}_{name}", work) for name, work in
               (("push", push), ("pop", pop), ("finish", finish))}  # fmt: skip
    assert len(leased) == SINGLE_TASKS, "every task pushed was popped"
    queue.close()
    return {name: count / SINGLE_TASKS for name, count in figures.items()}


def floor_figures(server: CountedServer, tasks: int, batch: int, count: int) -> dict[str, float]:
    """The same work with only the commands a task's life needs (bench_floor.py's
    functions: no fairness, counters, clock or checks): ``tasks`` pushed ``batch`` per
    call, popped and finished ``count`` per call."""
    client = redis.Redis.from_url(server.url)
    client.function_load(FLOOR_LIBRARY, replace=True)
    leased: list[list[bytes]] = []

    def push() -> None:
        for _ in range(tasks // batch):
            floor_push(client, batch)

    def pop() -> None:
        leased.extend(floor_pop(client, count) for _ in range(tasks // count))

    def finish() -> None:
        for ids in leased:
            floor_finish(client, ids)

    figures = {name: server.measure(f"floor_{name}", work) for name, work in
               (("push", push), ("pop", pop), ("finish", finish))}  # fmt: skip
    assert sum(map(len, leased)) == tasks, "every task pushed was popped"
    client.close()
    return {name: n / tasks for name, n in figures.items()}


def empty_calls(server: CountedServer) -> dict[str, float]:
    """A call's fixed cost: a pop that finds nothing ready, a finish of no task."""
    queue = FairQueue(server.url, "single")  # warmed up, and drained by one_per_call

    def pop() -> None:
        for _ in range(SINGLE_TASKS):
            assert not queue.pop(count=1, worker_id="bench"), "nothing is ready"

    def finish() -> None:
        for _ in range(SINGLE_TASKS):
            queue.finish_many([], [])

    figures = {name: server.measure(f"empty_{name}", work) for name, work in
               (("pop", pop), ("finish", finish))}  # fmt: skip
    queue.close()
    return {name: count / SINGLE_TASKS for name, count in figures.items()}


def warm_up(server: CountedServer, tenants: int) -> None:
    """Loads the functions and writes the namespaces' settings, outside the counts."""
    for namespace in ("batches", "single", "named"):
        with FairQueue(server.url, namespace) as queue:
            queue.push_many([task(i, tenants) for i in range(tenants)])
            leased = queue.pop(count=tenants, worker_id="bench")
            queue.finish_many(leased, [None] * len(leased))
            queue.finish_and_pop([], count=1, worker_id="bench")  # nothing is left to pop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, default=50)
    parser.add_argument("--redis-server", action="store_true", help="Debian's redis-server")
    options = parser.parse_args()
    if shutil.which("callgrind_control") is None:
        print("bench_instructions: valgrind is not installed (apt-get install valgrind)",
              file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    binary = shutil.which("redis-server") if options.redis_server else str(valkey_binary())
    if binary is None:
        print("bench_instructions: redis-server is not installed", file=sys.stderr)
        raise SystemExit(2)
    with tempfile.TemporaryDirectory() as folder:
        server = CountedServer(binary, Path(folder), free_port())
        try:
            warm_up(server, options.tenants)
            rows = {
                "batches (push 1,000, pop/finish 100)": batches(server, options.tenants),
                "one task per call": one_per_call(server, options.tenants),
                "one per call, a worker's pops (names)": one_per_call(
                    server, options.tenants, "named", ["send_email"]
                ),
            }
            empty = empty_calls(server)
            turns = {
                f"{label}, in turns": cycles(server, options.tenants, count, combined)
                for count in (100, 10)
                for label, combined in (
                    (f"pop {count}, finish them", False),
                    (f"finish + pop {count} in one call", True),
                )
            }
            # A worker at concurrency 1: one task a call, its task names named.
            for label, combined in (("pop 1 (names), finish it", False),
                                    ("finish + pop 1 (names), one call", True)):  # fmt: skip
                turns[f"{label}, in turns"] = cycles(
                    server, options.tenants, 1, combined, names=["send_email"],
                    tasks=SINGLE_TASKS * 2,
                )  # fmt: skip
            rows["the commands alone, batches"] = floor_figures(server, BATCH_TASKS, 1000, 100)
            rows["the commands alone, one per call"] = floor_figures(server, SINGLE_TASKS, 1, 1)
        finally:
            server.stop()
    print(f"{Path(binary).name}, {options.tenants} tenants: server instructions per task")
    print(f"{'':44}{'push':>10}{'pop':>10}{'finish':>10}{'all':>10}")
    for label, figures in rows.items():
        cells = "".join(f"{figures[name] / 1000:>9.1f}k" for name in ("push", "pop", "finish"))
        print(f"{label:44}{cells}{sum(figures.values()) / 1000:>9.1f}k")
    print(f"{'empty call (per call)':44}{'':>10}{empty['pop'] / 1000:>9.1f}k"
          f"{empty['finish'] / 1000:>9.1f}k")  # fmt: skip
    for label, figure in turns.items():
        print(f"{label:44}{'':>30}{figure / 1000:>9.1f}k")


if __name__ == "__main__":
    main()
