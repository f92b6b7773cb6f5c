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
wall time instead, per second, and lists the commands it sent (``INFO commandstats``).
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import redis
from callgrind import Counted, Counting
from driver import Harness, Peer, refuse_unless_throwaway
from peers_job import SPREAD_VARIABLE, URL_VARIABLE

HERE = Path(__file__).resolve().parent
TENANTS = 50  # fairque spreads the jobs over this many tenants; the others use one queue
WARM_JOBS = 3  # jobs an idle worker runs before its window
EVERY = 0.5  # seconds between two polls of the jobs' counter
ROWS = ["enqueue", "bulk", "process10", "process1", "life", "idle"]


@dataclass
class Meter:
    """Counts the servers' instructions around some work, less the bare servers' ``idle``
    rate (instructions per second) times the work's wall time."""

    counting: Counting
    idle: float = 0.0
    labels: itertools.count[int] = field(default_factory=itertools.count)

    def on(self) -> None:
        self.counting.on()

    def off(self) -> tuple[float, float]:
        """(instructions less the idle servers', seconds)."""
        count, seconds = self.counting.off(f"window{next(self.labels)}")
        return count - self.idle * seconds, seconds

    def measure_idle(self, seconds: float) -> float:
        """Sets (and returns) the servers' rate with nothing running."""
        self.on()
        time.sleep(seconds)  # the window measured, not a wait for state
        count, elapsed = self.counting.off(f"idle{next(self.labels)}")
        self.idle = count / elapsed
        return self.idle


def per_job(count: Callable[[int], float], jobs: int) -> float:
    """``(count(2 * jobs) - count(jobs)) / jobs``: a start-up's and a stop's cost cancel."""
    return (count(2 * jobs) - count(jobs)) / jobs


def commands(client: redis.Redis) -> dict[str, int]:
    """Calls so far of each command (``INFO commandstats``), ``INFO`` left out."""
    stats: dict[str, dict[str, int]] = client.info("commandstats")
    return {
        name.removeprefix("cmdstat_"): int(value["calls"])
        for name, value in stats.items()
        if name != "cmdstat_info"
    }


def idle_window(
    meter: Meter, clients: Sequence[redis.Redis], seconds: float
) -> tuple[float, dict[str, float]]:
    """Counts ``seconds`` of wall time of whatever runs (a warmed-up idle worker): its
    instructions per second on the servers of ``clients``, and its calls per second."""
    before = [commands(client) for client in clients]
    meter.on()
    time.sleep(seconds)  # the window measured, not a wait for state
    count, elapsed = meter.off()
    calls: dict[str, float] = {}
    for client, earlier in zip(clients, before, strict=True):
        for name, total in commands(client).items():
            calls[name] = calls.get(name, 0.0) + (total - earlier.get(name, 0)) / elapsed
    return count / elapsed, {name: rate for name, rate in sorted(calls.items()) if rate}


@dataclass
class Rows:
    """One queue's rows, each a count for ``jobs`` jobs."""

    harness: Harness
    meter: Meter

    def done(self, jobs: int, started: list[Any]) -> None:
        timeout = 120 + jobs * 0.5  # a server under valgrind runs ~50x slower
        self.harness.wait(lambda: self.harness.count() >= jobs, timeout, started, EVERY)

    def enqueue(self, jobs: int, bulk: bool) -> float:
        self.harness.reset()
        self.meter.on()
        self.harness.push(jobs, bulk=bulk)
        return self.meter.off()[0]

    def process(self, jobs: int, concurrency: int | None) -> float:
        """The jobs pushed first (not counted), then the worker from its start to the last job."""
        self.harness.reset()
        self.harness.push(jobs, bulk=self.harness.peer.bulk_api is not None)
        self.meter.on()
        with self.harness.running("process", 1, concurrency=concurrency) as started:
            self.done(jobs, started)
            return self.meter.off()[0]

    def life(self, jobs: int) -> float:
        """One-call pushes while the default worker runs them, from its start to the last."""
        self.harness.reset()
        self.meter.on()
        with self.harness.running("life", 1) as started:
            self.harness.push(jobs, bulk=False)
            self.done(jobs, started)
            return self.meter.off()[0]

    def idle(self, seconds: float) -> tuple[float, dict[str, float]]:
        """A warmed-up idle worker: instructions per second, and its calls per second."""
        self.harness.reset()
        with self.harness.running("idle", 1) as started:
            for warm in range(1, WARM_JOBS + 1):
                self.harness.peer.enqueue([""])
                self.done(warm, started)
            return idle_window(self.meter, [self.harness.client], seconds)


def outcome() -> dict[str, Any]:
    """Figures, idle workers' calls and errors by row; what ran; the bare servers' rates."""
    return {"figures": {}, "idle_calls": {}, "errors": {}, "about": {}, "idle_server": {}}


def attempt(result: dict[str, Any], row: str, figure: Callable[[], float], repeat: int) -> None:
    """``figure()`` ``repeat`` times into ``result``; a failure is reported, not fatal."""
    try:
        result["figures"][row] = [figure() for _ in range(repeat)]
    except Exception as error:  # kept for the report; the next row runs
        result["errors"][row] = f"{type(error).__name__}: {error}"
        traceback.print_exc()
    print(f"{row}: {result['figures'].get(row)}", flush=True)


def measure(
    rows: Rows, wanted: list[str], jobs: int, repeat: int, seconds: float
) -> dict[str, Any]:
    """Each wanted row of a peer's (bulk where it has it), ``repeat`` times."""
    result = outcome()

    def idle() -> float:
        rate, result["idle_calls"]["idle"] = rows.idle(seconds)
        return rate

    counts: dict[str, Callable[[int], float]] = {
        "enqueue": lambda n: rows.enqueue(n, bulk=False),
        "process10": lambda n: rows.process(n, 10),
        "process1": lambda n: rows.process(n, 1),
        "life": rows.life,
    }
    if rows.harness.peer.bulk_api is not None:
        counts["bulk"] = lambda n: rows.enqueue(n, bulk=True)
    for row in wanted:
        if row == "idle":
            attempt(result, row, idle, repeat)
        elif row in counts:
            attempt(result, row, partial(per_job, counts[row], jobs), repeat)
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
    meter = Meter(Counting([server]))
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
