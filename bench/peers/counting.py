"""Server instructions per job for one queue, counted under callgrind; instructions.py runs it.

    python bench/peers/counting.py --peer bullmq --server PID:PORT:FOLDER --out FILE
        [--jobs 2000] [--repeat 2] [--idle-seconds 20] [--rows enqueue,bulk,...]

Runs in the queue's own venv (stdlib and redis-py), with ``driver.py``'s harness and the
queue's ``peer_<name>.py``: its client calls and its own worker command. The server is
instructions.py's, under callgrind (``bench/callgrind.py``). Each row's figure is the
server's instructions from the start of the work to its end (a worker's start until every
job ran), less the bare server's own rate (its timers, measured first with nothing
running) times the window's wall time, for 2N jobs minus that for N jobs, over N: what
start-up and stop cost cancels. The idle row counts a warmed-up worker for a window of
wall time instead (from 40 s after its last job), per second, less a bare window counted
right after the worker stopped (the server then holds the data the worker's warm-up
left: keys with a time to live cost its expiry cycle whoever waits), and lists the
commands it sent (``INFO commandstats``).
A waiting harness polls the jobs' counter every 0.5 s: a ``GET`` (a few thousand
instructions) twice a second, in every figure's window alike.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import json
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import redis
from callgrind import Counted, Counting
from driver import Harness, Peer, refuse_unless_throwaway
from peers_job import SPREAD_VARIABLE, URL_VARIABLE

TENANTS = 50  # fairque spreads the jobs over this many tenants; the others use one queue
WARM_JOBS = 3  # jobs an idle worker runs before its window
# Seconds between an idle worker's last job and its window, for every queue alike: what
# follows a job (its acknowledgement, the first wait's upkeep; fairque's abort subscription
# and calls' connection, kept a poll interval, 45 s, after a run) is not idleness.
IDLE_SETTLE_SECONDS = 55.0
EVERY = 0.5  # seconds between two polls of the jobs' counter
Figure = Callable[[], tuple[float, dict[str, float]]]  # a figure, and calls per job or second
ROWS = ["enqueue", "bulk", "process10", "process1", "life", "idle"]


@dataclass(frozen=True)
class Window:
    """What the servers did from a :meth:`Meter.on` to its :meth:`Meter.off`."""

    instructions: float  # less the bare servers' own over the same wall time
    seconds: float
    calls: dict[str, int]  # by command (``INFO commandstats``: the scripts' commands too)
    client_work: float = 0.0  # the instructions of callgrind.CLIENT_WORK, if counted


@dataclass
class Meter:
    """Counts the servers' instructions around some work, less the bare servers' ``idle``
    rate (instructions per second) times the work's wall time; ``clients`` (one per server)
    read their calls."""

    counting: Counting
    clients: list[redis.Redis]
    idle: float = 0.0
    labels: itertools.count[int] = field(default_factory=itertools.count)
    before: list[dict[str, int]] = field(default_factory=list)

    def on(self) -> None:
        self.before = [commands(client) for client in self.clients]
        self.counting.on()

    def off(self, *, bare: bool = True) -> Window:
        """The window since :meth:`on`, less the bare servers' rate unless ``bare`` is False."""
        count, seconds = self.counting.off(f"window{next(self.labels)}")
        calls: dict[str, int] = {}
        for client, earlier in zip(self.clients, self.before, strict=True):
            for name, total in commands(client).items():
                calls[name] = calls.get(name, 0) + total - earlier.get(name, 0)
        client_work = self.counting.client_work if self.counting.clients else 0.0
        return Window(count - (self.idle * seconds if bare else 0), seconds, calls, client_work)

    def measure_idle(self, seconds: float) -> float:
        """Sets (and returns) the servers' own rate, with nothing running."""
        self.idle = 0.0
        self.on()
        time.sleep(seconds)  # the window measured, not a wait for state
        self.idle = self.off().instructions / seconds
        return self.idle

    def idle_worker(self, seconds: float) -> Window:
        """Counts ``seconds`` of wall time of a warmed-up idle worker, whole, from
        :data:`IDLE_SETTLE_SECONDS` after its last job: :meth:`less_bare` takes the bare
        servers' rate off once the worker has stopped."""
        time.sleep(IDLE_SETTLE_SECONDS)  # the worker settles: not a wait for state
        self.counting.clients = True
        self.on()
        time.sleep(seconds)  # the window measured, not a wait for state
        return self.off(bare=False)

    def less_bare(self, worker: Window) -> tuple[float, dict[str, float]]:
        """An idle worker's instructions per second, and calls per second: the server's
        work for its clients (``callgrind.CLIENT_WORK``) in the worker's window, less
        that in a window as long counted now, the worker stopped (the clients' cron runs
        with no client too). The whole servers' rates of both windows are printed, and
        their difference: it swings by ~8k a second from one window to the next (the
        server's event loop turns a second with its timers' phases; its own rate grows
        with the keys that have a time to live, 89k a second empty, 95-109k after a
        warm-up), so it is not the figure."""
        self.on()
        time.sleep(worker.seconds)  # the window measured, not a wait for state
        bare = self.off(bare=False)
        self.counting.clients = False
        whole = worker.instructions / worker.seconds - bare.instructions / bare.seconds
        rate = worker.client_work / worker.seconds - bare.client_work / bare.seconds
        print(f"  idle worker {worker.instructions / worker.seconds:,.0f}/s, then bare "
              f"{bare.instructions / bare.seconds:,.0f}/s (whole servers: {whole:,.0f}/s); "
              f"their clients' work {rate:,.0f}/s", flush=True)  # fmt: skip
        return rate, per(worker.calls, worker.seconds)


def commands(client: redis.Redis) -> dict[str, int]:
    """Calls so far of each command (``INFO commandstats``), ``INFO`` left out."""
    stats: dict[str, dict[str, int]] = client.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(value["calls"])
        for name, value in stats.items()
        if name != "cmdstat_info"
    }


def per(calls: dict[str, int], divisor: float) -> dict[str, float]:
    return {name: count / divisor for name, count in sorted(calls.items()) if count}


def per_job(count: Callable[[int], Window], jobs: int) -> Figure:
    """Instructions and calls per job, for 2N jobs less those for N (``jobs``): a start-up's
    and a stop's cost cancel. Before its first count, ``jobs // 10`` jobs are run and not
    counted: what a server does once (loading a library of scripts) lands in no window."""
    warm = [max(1, jobs // 10)]

    def figure() -> tuple[float, dict[str, float]]:
        while warm:
            count(warm.pop())
        return difference(count(jobs), count(2 * jobs), jobs)

    return figure


def difference(one: Window, two: Window, jobs: int) -> tuple[float, dict[str, float]]:
    print(f"  {one.instructions:,.0f} in {one.seconds:.1f} s, "
          f"{two.instructions:,.0f} in {two.seconds:.1f} s", flush=True)  # fmt: skip
    calls = {name: total - one.calls.get(name, 0) for name, total in two.calls.items()}
    return (two.instructions - one.instructions) / jobs, per(calls, jobs)


@dataclass
class Rows:
    """One queue's rows, each a count for ``jobs`` jobs."""

    harness: Harness
    meter: Meter

    def done(self, jobs: int, started: list[Any]) -> None:
        timeout = 120 + jobs * 0.5  # a server under valgrind runs ~50x slower
        self.harness.wait(lambda: self.harness.count() >= jobs, timeout, started, EVERY)

    def enqueue(self, jobs: int, bulk: bool) -> Window:
        self.harness.reset()
        self.meter.on()
        self.harness.push(jobs, bulk=bulk)
        return self.meter.off()

    def process(self, jobs: int, concurrency: int | None) -> Window:
        """The jobs pushed first (not counted), then the worker from its start to the last job."""
        self.harness.reset()
        self.harness.push(jobs, bulk=self.harness.peer.bulk_api is not None)
        self.meter.on()
        with self.harness.running("process", 1, concurrency=concurrency) as started:
            self.done(jobs, started)
            return self.meter.off()

    def life(self, jobs: int) -> Window:
        """One-call pushes while the default worker runs them, from its start to the last."""
        self.harness.reset()
        self.meter.on()
        with self.harness.running("life", 1) as started:
            self.harness.push(jobs, bulk=False)
            self.done(jobs, started)
            return self.meter.off()

    def idle(self, seconds: float) -> tuple[float, dict[str, float]]:
        """A warmed-up idle worker: instructions per second, and its calls per second."""
        self.harness.reset()
        with self.harness.running("idle", 1) as started:
            for warm in range(1, WARM_JOBS + 1):
                self.harness.peer.enqueue([""])
                self.done(warm, started)
            window = self.meter.idle_worker(seconds)
        return self.meter.less_bare(window)


def outcome() -> dict[str, Any]:
    """By row: its figures, calls per job (per second for an idle worker: the last count's)
    and errors; what ran; the bare servers' rates."""
    return {"figures": {}, "calls": {}, "errors": {}, "about": {}, "idle_server": {}}


def attempt(result: dict[str, Any], row: str, figure: Figure, repeat: int) -> None:
    """``figure()`` ``repeat`` times into ``result``; a failure is reported, not fatal."""
    try:
        for _ in range(repeat):
            value, result["calls"][row] = figure()
            result["figures"].setdefault(row, []).append(value)
    except Exception as error:  # kept for the report; the next row runs
        result["errors"][row] = f"{type(error).__name__}: {error}"
        traceback.print_exc()
    print(f"{row}: {result['figures'].get(row)}", flush=True)


def measure(
    rows: Rows, wanted: list[str], jobs: int, repeat: int, seconds: float
) -> dict[str, Any]:
    """Each wanted row of a peer's (bulk where it has it), ``repeat`` times."""
    result = outcome()
    counts: dict[str, Callable[[int], Window]] = {
        "enqueue": partial(rows.enqueue, bulk=False),
        "process10": partial(rows.process, concurrency=10),
        "process1": partial(rows.process, concurrency=1),
        "life": rows.life,
    }
    if rows.harness.peer.bulk_api is not None:
        counts["bulk"] = partial(rows.enqueue, bulk=True)
    for row in wanted:
        if row == "idle":
            attempt(result, row, partial(rows.idle, seconds), repeat)
        elif row in counts:
            attempt(result, row, per_job(counts[row], jobs), repeat)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", required=True)
    parser.add_argument("--server", required=True, help="PID:PORT:FOLDER (callgrind.Counted)")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--logs", type=Path, default=Path.cwd())
    parser.add_argument("--out", type=Path, required=True)
    options = parser.parse_args()
    server = Counted.from_spec(options.server)
    os.environ[URL_VARIABLE] = server.url
    os.environ[SPREAD_VARIABLE] = str(TENANTS)  # read by the queues with tenants only
    peer: Peer = importlib.import_module(f"peer_{options.peer}").make_peer(server.url)
    client = redis.Redis.from_url(server.url)
    refuse_unless_throwaway(client, server.url)
    options.logs.mkdir(parents=True, exist_ok=True)
    meter = Meter(Counting([server]), [client])
    rows = Rows(Harness(peer, client, options.logs, "count"), meter)
    try:
        idle = meter.measure_idle(options.idle_seconds)
        result = measure(
            rows, options.rows.split(","), options.jobs, options.repeat, options.idle_seconds
        )
    finally:
        peer.close()
        client.close()
    result["about"] = {"version": peer.version, "model": peer.model, "bulk": bool(peer.bulk_api)}
    result["idle_server"]["rows"] = idle
    options.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
