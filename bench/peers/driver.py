"""The harness each queue's driver runs, in that queue's own venv (stdlib and redis-py only).

    python bench/peers/driver.py --peer rq --url redis://127.0.0.1:PORT/0 --out FILE

``run.py`` starts it once per queue and repetition; it imports ``peer_<name>.py`` (the
queue's job, its worker setup and its client calls), measures every figure the same way
for every queue, and writes them as JSON to ``--out``.

The job is the same everywhere: ``peers_job.record`` (or ``arecord``), one Redis call.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any, Protocol

import redis
from peers_job import COUNT, FIRST, KINDS, LAST, LOG, TENANTS_VARIABLE, URL_VARIABLE, Workers, url

HERE = Path(__file__).resolve().parent
BIG_JOBS, SMALL_TENANTS, SMALL_JOBS = 5000, 50, 10
BATCH = 1000
PACE = 0.02  # seconds between two pushes in the latency run
WARM_UP = 5  # jobs run (and not measured) before the latency run
# run.py's throwaway server keeps its (empty) files in a folder named so; the driver
# FLUSHes the database between figures, so it refuses any other server.
SERVER_DIR_PREFIX = "fairque-peers-redis-"


def all_tenants() -> list[str]:
    return ["big", *(f"small{n}" for n in range(SMALL_TENANTS))]


class Peer(Protocol):
    """What each ``peer_<name>.py`` makes with ``make_peer(url)``."""

    name: str
    version: str
    model: str  # the worker's concurrency model, as run here
    enqueue_api: str
    bulk_api: str | None  # None: no bulk enqueue
    fairness: str  # how tenants are mapped onto the queue

    def prepare(self) -> None:
        """Called after every FLUSHALL, before the first push."""

    def enqueue(self, entries: Sequence[str], tenant: str | None = None) -> None:
        """One client call per job."""

    def enqueue_bulk(self, entries: Sequence[str], tenant: str | None = None) -> None:
        """One bulk call for all ``entries`` (only when ``bulk_api``)."""

    def workers(
        self, processes: int, tenants: Sequence[str] | None = None, concurrency: int | None = None
    ) -> Workers:
        """The worker commands, at the peer's default concurrency; only fairque's, BullMQ's
        and Dramatiq's take ``concurrency`` (for instructions.py)."""

    def close(self) -> None: ...


# The harness.


class TerminatedError(Exception):
    """SIGTERM from run.py: unwind so that every worker started here is stopped."""


def on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise TerminatedError(f"signal {signum}")


@dataclass
class Harness:
    peer: Peer
    client: redis.Redis
    logs: Path
    label: str

    def reset(self) -> None:
        self.client.flushall()
        self.peer.prepare()

    def count(self) -> int:
        return int(self.client.get(COUNT) or 0)

    def kind(self, kind: str) -> int:
        return int(self.client.hget(KINDS, kind) or 0)

    @contextmanager
    def running(
        self,
        phase: str,
        processes: int,
        tenants: Sequence[str] | None = None,
        concurrency: int | None = None,
    ) -> Iterator[list[subprocess.Popen[bytes]]]:
        """Starts the peer's worker(s), each in a session of its own, and stops them by PID."""
        spec = (
            self.peer.workers(processes, tenants)
            if concurrency is None
            else self.peer.workers(processes, tenants, concurrency)
        )
        env = {**os.environ, **spec.env, URL_VARIABLE: url()}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
        if tenants:
            env[TENANTS_VARIABLE] = ",".join(tenants)
        log_path = self.logs / f"{self.peer.name}-{self.label}-{phase}.log"
        started: list[subprocess.Popen[bytes]] = []
        with log_path.open("ab") as log:
            try:
                for command in spec.commands:
                    log.write(f"$ {' '.join(command)}\n".encode())
                    log.flush()
                    process = subprocess.Popen(
                        command,
                        cwd=HERE,
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,  # its own process group, led by its PID
                    )
                    started.append(process)
                yield started
            finally:
                stop(started, log, spec.grace)

    def wait(
        self,
        probe: Callable[[], bool],
        timeout: float,
        processes: Sequence[subprocess.Popen[bytes]] = (),
        every: float = 0.02,
    ) -> None:
        if not self.wait_until(probe, timeout, processes, every):
            raise TimeoutError(f"not done after {timeout:.0f} s (see {self.logs})")

    def wait_kind(
        self, kind: str, count: int, timeout: float, processes: Sequence[subprocess.Popen[bytes]]
    ) -> None:
        """Waits until ``count`` jobs whose entry is of ``kind`` have run."""
        self.wait(lambda: self.kind(kind) >= count, timeout, processes)

    def wait_until(
        self,
        probe: Callable[[], bool],
        timeout: float,
        processes: Sequence[subprocess.Popen[bytes]] = (),
        every: float = 0.02,
    ) -> bool:
        """Polls ``probe`` every ``every`` s (20 ms); False after ``timeout`` s; fails if a
        worker died."""
        deadline = time.monotonic() + timeout
        while not probe():
            dead = [p for p in processes if p.poll() is not None]
            if dead:
                raise RuntimeError(f"worker exited with {dead[0].returncode} (see {self.logs})")
            if time.monotonic() > deadline:
                return False
            time.sleep(every)
        return True

    def progress(self) -> tuple[int, float, float]:
        """(jobs run, first start, last end), read at once."""
        count, first, last = self.client.mget(COUNT, FIRST, LAST)
        assert first is not None
        assert last is not None
        return int(count or 0), float(first), float(last)

    def log(self) -> list[tuple[str, str, float]]:
        """(kind, detail, start time) of every logged job, in the order they ran."""
        rows = []
        for raw in self.client.lrange(LOG, 0, -1):
            text = raw.decode() if isinstance(raw, bytes) else str(raw)
            kind, detail, started = text.split(" ")
            rows.append((kind, detail, float(started)))
        return rows

    # The figures.

    def push(self, jobs: int, bulk: bool) -> float:
        """Pushes ``jobs`` drain jobs (one call each, or in batches of 1,000); jobs/s."""
        entries = [""] * jobs
        started = time.perf_counter()
        if bulk:
            for first in range(0, jobs, BATCH):
                self.peer.enqueue_bulk(entries[first : first + BATCH])
        else:
            self.peer.enqueue(entries)
        return jobs / (time.perf_counter() - started)

    def drain(self, jobs: int, processes: int, cap: float) -> dict[str, float]:
        """Jobs/s from the first job's start to the last job's end, for ``jobs`` queued jobs.

        A queue that cannot run them all within ``cap`` seconds is measured on the jobs it
        ran by then (``done`` says how many).
        """
        launched = time.time()
        with self.running(f"drain{processes}", processes) as started:
            self.wait(lambda: self.count() >= 1, 120, started)  # the workers' start
            self.wait_until(lambda: self.count() >= jobs, cap, started)
            done, first, last = self.progress()
        return {"rate": done / (last - first), "done": done, "startup_s": first - launched}

    def latency(self, count: int, timeout: float) -> dict[str, float]:
        """Push to start, in ms, of ``count`` jobs pushed one at a time, 20 ms apart, to 1
        idle worker process.

        The pushes keep their own clock (never waiting for the worker), so a polling
        worker is sampled at random phases. ``trend`` is the median latency of the last
        quarter of the jobs over that of the first: well above 1, the worker could not
        run a job every 20 ms and the figure includes waiting behind earlier jobs.
        """
        with self.running("latency", 1) as started:
            self.peer.enqueue(["warm -"])  # the worker's start, imports and connections
            self.wait_kind("warm", 1, timeout, started)
            for _ in range(WARM_UP):
                self.peer.enqueue(["warm -"])
                time.sleep(PACE)
            self.wait_kind("warm", 1 + WARM_UP, timeout, started)
            due = time.monotonic()
            for _ in range(count):
                self.peer.enqueue([f"lat {time.time():.6f}"])
                due += PACE
                time.sleep(max(0.0, due - time.monotonic()))
            self.wait_kind("lat", count, timeout, started)
        jobs = sorted(
            (float(pushed_at), started_at)
            for kind, pushed_at, started_at in self.log()
            if kind == "lat"
        )
        in_order = [(started_at - pushed_at) * 1000 for pushed_at, started_at in jobs]
        quarter = max(1, len(in_order) // 4)
        trend = statistics.median(in_order[-quarter:]) / statistics.median(in_order[:quarter])
        latencies = sorted(in_order)
        return {
            "p50": latencies[len(latencies) // 2],
            "p99": latencies[math.ceil(len(latencies) * 0.99) - 1],
            "max": latencies[-1],
            "count": len(latencies),
            "trend": trend,
        }

    def fairness(self, timeout: float) -> dict[str, float]:
        """Big pushes 5,000 jobs, then 50 small tenants 10 each; 1 worker process runs them.

        Position (1-based, in start order) of the last small tenant's job, and seconds from
        the first job's start to that job's start. Stops once every small job ran.
        """
        bulk = self.peer.bulk_api is not None
        big = ["big -"] * BIG_JOBS
        for first in range(0, BIG_JOBS, BATCH):
            if bulk:
                self.peer.enqueue_bulk(big[first : first + BATCH], tenant="big")
            else:
                self.peer.enqueue(big[first : first + BATCH], tenant="big")
        for tenant in all_tenants()[1:]:
            small = [f"small {tenant}"] * SMALL_JOBS
            if bulk:
                self.peer.enqueue_bulk(small, tenant=tenant)
            else:
                self.peer.enqueue(small, tenant=tenant)
        total = SMALL_TENANTS * SMALL_JOBS
        with self.running("fairness", 1, all_tenants()) as started:
            self.wait_kind("small", total, timeout, started)
        rows = self.log()
        began = min(started_at for _, _, started_at in rows)
        position, last = max(
            (index, started_at)
            for index, (kind, _, started_at) in enumerate(rows, 1)
            if kind == "small"
        )
        return {"position": position, "seconds": last - began, "ran": len(rows)}


def stop(processes: Sequence[subprocess.Popen[bytes]], log: IO[bytes], grace: float) -> None:
    """SIGTERM to each worker (its own warm shutdown), then SIGKILL to what is left of the
    process group it leads (pool children), by its PID; bounded in time."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(p.poll() is None for p in processes):
        time.sleep(0.05)
    for process in processes:
        if process.poll() is None:
            log.write(
                f"[harness] {process.pid} still running {grace:.0f} s after SIGTERM\n".encode()
            )
    for process in processes:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the group is the worker's own session
        except ProcessLookupError:
            continue  # nothing left of it
        process.wait(timeout=10)


def measure(
    harness: Harness, jobs: int, latency_jobs: int, cap: float, phases: set[str]
) -> dict[str, Any]:
    """Every figure, each in a fresh database; a failed figure is reported, not fatal."""
    results: dict[str, Any] = {}
    errors: dict[str, str] = {}
    peer = harness.peer

    def attempt(name: str, figure: Callable[[], Any]) -> None:
        if name not in phases:
            return
        try:
            results[name] = figure()
        except TerminatedError:
            raise
        except Exception as error:  # kept for the report; the next figure runs
            errors[name] = f"{type(error).__name__}: {error}"
            traceback.print_exc()

    def first_pass() -> dict[str, Any]:
        harness.reset()
        enqueue = harness.push(jobs, bulk=False)
        return {"enqueue": enqueue, **prefixed("drain1", harness.drain(jobs, 1, cap))}

    def second_pass() -> dict[str, Any]:
        harness.reset()
        bulk = harness.push(jobs, bulk=True) if peer.bulk_api else None
        if bulk is None:
            harness.push(jobs, bulk=False)  # queued one call each, not timed
        return {"bulk": bulk, **prefixed("drain2", harness.drain(jobs, 2, cap))}

    def latency() -> dict[str, float]:
        harness.reset()
        return harness.latency(latency_jobs, timeout=120)

    def fairness() -> dict[str, float]:
        harness.reset()
        return harness.fairness(timeout=240)

    attempt("one", first_pass)
    attempt("two", second_pass)
    attempt("latency", latency)
    attempt("fairness", fairness)
    flat: dict[str, Any] = {}
    for name, values in results.items():
        flat.update(prefixed(name, values) if name in {"latency", "fairness"} else values)
    return {"figures": flat, "errors": errors}


def refuse_unless_throwaway(client: redis.Redis, url: str) -> None:
    """Exits unless ``url`` is a benchmark's throwaway server: the harness FLUSHes it."""
    server_dir = str(client.config_get("dir").get("dir", ""))
    if SERVER_DIR_PREFIX not in server_dir:
        raise SystemExit(f"{url} is not a benchmark's throwaway server (dir {server_dir!r})")


def prefixed(prefix: str, values: dict[str, Any]) -> dict[str, Any]:
    return {f"{prefix}_{key}": value for key, value in values.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--latency-jobs", type=int, default=200)
    parser.add_argument("--drain-cap", type=float, default=8.0, help="seconds per drain")
    parser.add_argument("--phases", default="one,two,latency,fairness")
    parser.add_argument("--label", default="run")
    parser.add_argument("--logs", type=Path, default=Path.cwd())
    parser.add_argument("--out", type=Path, required=True)
    options = parser.parse_args()
    os.environ[URL_VARIABLE] = options.url
    signal.signal(signal.SIGTERM, on_sigterm)
    sys.path.insert(0, str(HERE))
    client = redis.Redis.from_url(options.url)
    refuse_unless_throwaway(client, options.url)
    module = importlib.import_module(f"peer_{options.peer}")
    peer: Peer = module.make_peer(options.url)
    options.logs.mkdir(parents=True, exist_ok=True)
    harness = Harness(peer, client, options.logs, options.label)
    try:
        outcome = measure(
            harness,
            options.jobs,
            options.latency_jobs,
            options.drain_cap,
            set(options.phases.split(",")),
        )
    finally:
        peer.close()
        client.close()
    outcome["about"] = {
        "version": peer.version,
        "model": peer.model,
        "enqueue_api": peer.enqueue_api,
        "bulk_api": peer.bulk_api,
        "fairness": peer.fairness,
        "python": sys.version.split()[0],
        "redis_py": redis.__version__,
    }
    options.out.write_text(json.dumps(outcome, indent=1))


if __name__ == "__main__":
    main()
