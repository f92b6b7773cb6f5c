"""fairque side by side with peer Python task queues: one harness, one throwaway Redis.

    uv run python bench/peers/run.py [--queues fairque,rq,dramatiq,celery,arq,taskiq,bullmq]
                                     [--repeat 3] [--jobs 5000]

Starts Debian's ``redis-server`` on a free loopback port (no persistence), makes one venv
per peer under ``~/.cache/fairque-bench-peers/<queue>`` (``uv venv`` + ``uv pip install``
of the pinned versions below; reused while the pins are unchanged; BullMQ, a Node
library, gets a venv with redis-py for the driver plus ``npm ci`` of ``bullmq/``'s
``package-lock.json`` into ``node/`` there, reused while that lock is unchanged), and runs
``driver.py`` once per queue and repetition, in that queue's venv (fairque's in this
project's environment). The driver starts the queue's own worker command, as a user
would, measures, and stops every process it started by its PID. Prints a Markdown table
of the medians and writes every raw figure as JSON next to the venvs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import redis
from driver import SERVER_DIR_PREFIX

HERE = Path(__file__).resolve().parent
REDIS_SERVER = "/usr/bin/redis-server"
PYTHON = "3.11"
CACHE = Path.home() / ".cache" / "fairque-bench-peers"
TOKEN_VARIABLE = "FAIRQUE_PEERS_RUN"  # marks every process a driver run started

# The latest releases on PyPI that install on Python 3.11 (checked 2026-11-23).
PEERS: dict[str, list[str]] = {
    "rq": ["rq==3.0.0"],
    "dramatiq": ["dramatiq[redis]==2.2.1"],
    "celery": ["celery[redis]==5.7.0"],
    "arq": ["arq==0.28.0"],
    "taskiq": ["taskiq==0.13.0", "taskiq-redis==1.2.4"],
    # Node: the driver's venv needs only redis-py (the version of the project's lock);
    # BullMQ itself is pinned by bullmq/package.json and bullmq/package-lock.json.
    "bullmq": ["redis==8.1.0"],
}
# Peers with a Node side: the folder holding its package.json and package-lock.json.
NODE_PEERS: dict[str, Path] = {"bullmq": HERE / "bullmq"}
QUEUES = ["fairque", *PEERS]


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    higher_is_better: bool
    unit: str


def rows(jobs: int) -> list[Row]:
    return [
        Row("enqueue", "enqueue, one call per job", True, "jobs/s"),
        Row("bulk", "bulk enqueue, batches of 1,000", True, "jobs/s"),
        Row("drain1_rate", f"drain {jobs:,} queued jobs, 1 worker process", True, "jobs/s"),
        Row("drain2_rate", f"drain {jobs:,} queued jobs, 2 worker processes", True, "jobs/s"),
        Row("latency_p50", "idle pickup latency p50", False, "ms"),
        Row("latency_p99", "idle pickup latency p99", False, "ms"),
        Row("fairness_position", "fairness: position of the last small job (ideal 510)", False, ""),
        Row("fairness_seconds", "fairness: seconds until the last small job started", False, "s"),
    ]


def venv_python(queue: str, cache: Path) -> Path:
    """The interpreter of ``queue``'s venv, made (or remade when the pins moved) if needed."""
    if queue == "fairque":
        return Path(sys.executable)
    folder = cache / queue
    python = folder / "bin" / "python"
    stamp = folder / "pins.txt"
    wanted = "\n".join(PEERS[queue])
    if queue in NODE_PEERS:
        lock = (NODE_PEERS[queue] / "package-lock.json").read_bytes()
        wanted += f"\npackage-lock.json sha256 {hashlib.sha256(lock).hexdigest()}"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    uv = shutil.which("uv")
    if uv is None:
        raise SystemExit("uv is needed to make the peers' venvs")
    print(f"making the venv of {queue} in {folder}", flush=True)
    subprocess.run(
        [uv, "venv", "--quiet", "--clear", "--python", PYTHON, str(folder)], check=True, timeout=300
    )
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(python), *PEERS[queue]],
        check=True,
        timeout=900,
    )
    if queue in NODE_PEERS:
        npm_install(NODE_PEERS[queue], folder / "node")
    stamp.write_text(wanted)
    return python


def npm_install(source: Path, folder: Path) -> None:
    """``npm ci`` of ``source``'s package.json and package-lock.json into ``folder``."""
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm (and node) are needed for the Node peers")
    print(f"npm ci of {source.name} in {folder}", flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(source / name, folder / name)
    subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=folder,
        check=True,
        timeout=600,
    )


def node_modules(queue: str, cache: Path) -> Path:
    return cache / queue / "node" / "node_modules"


def freeze(queue: str, python: Path, cache: Path) -> list[str]:
    """Every package in a venv (and a Node peer's node_modules), with its version."""
    uv = shutil.which("uv")
    if uv is None:
        return []
    listing = subprocess.run(
        [uv, "pip", "freeze", "--python", str(python)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    packages = listing.stdout.split()
    if queue in NODE_PEERS:
        lock = json.loads((node_modules(queue, cache).parent / "package-lock.json").read_text())
        packages += [
            f"npm:{path.removeprefix('node_modules/')}@{about.get('version', '?')}"
            for path, about in lock.get("packages", {}).items()
            if path
        ]
        packages.append(f"node {platform_node()}")
    return packages


def platform_node() -> str:
    node = shutil.which("node")
    if node is None:
        return "?"
    version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    return version.stdout.strip()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def redis_server() -> Iterator[tuple[str, str]]:
    """A throwaway ``redis-server`` on a free loopback port: (url, version); stopped by PID."""
    folder = tempfile.mkdtemp(prefix=SERVER_DIR_PREFIX)
    port = free_port()
    process = subprocess.Popen(
        [
            REDIS_SERVER,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            folder,
            "--daemonize",
            "no",
        ],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.05)
        version = str(client.info("server")["redis_version"])
        client.close()
        yield url, version
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def sweep(token: str) -> list[int]:
    """SIGKILLs, by PID, any process left over from one driver run (found by its token)."""
    marker = f"{TOKEN_VARIABLE}={token}".encode()
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                continue
    return killed


def run_in_venv(
    queue: str,
    python: Path,
    arguments: Sequence[str],
    *,
    cache: Path,
    log: Path,
    timeout: float,
    pythonpath: Sequence[Path] = (HERE,),
) -> tuple[int, list[int]]:
    """Runs ``python arguments`` (a script of this folder) in ``queue``'s venv, in a session
    of its own, bounded by ``timeout``; then SIGKILLs, by PID, whatever it left running.
    (Its exit code, the PIDs killed.)"""
    token = uuid.uuid4().hex
    env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(map(str, pythonpath)),
            TOKEN_VARIABLE: token,
            "PYTHONUNBUFFERED": "1",
        }
    )
    if queue in NODE_PEERS:  # the driver's Node processes (workers, producer) inherit it
        env["NODE_PATH"] = str(node_modules(queue, cache))
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(python), *arguments],
            cwd=HERE,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)  # the driver stops its workers, then exits
            try:
                code = process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                code = process.wait(timeout=10)
        finally:
            left = sweep(token)
    return code, left


def drive(
    queue: str, python: Path, url: str, options: argparse.Namespace, *, label: str, folder: Path
) -> dict[str, Any]:
    """One driver run (every figure once) in ``queue``'s venv, bounded by ``--timeout``."""
    out = folder / f"{queue}-{label}.json"
    out.unlink(missing_ok=True)
    arguments = [
        str(HERE / "driver.py"),
        "--peer",
        queue,
        "--url",
        url,
        "--jobs",
        str(options.jobs),
        "--latency-jobs",
        str(options.latency_jobs),
        "--drain-cap",
        str(options.drain_cap),
        "--label",
        label,
        "--logs",
        str(folder / "logs"),
        "--out",
        str(out),
    ]
    code, left = run_in_venv(
        queue,
        python,
        arguments,
        cache=options.cache,
        log=folder / "logs" / f"{queue}-{label}-driver.log",
        timeout=options.timeout,
    )
    if out.exists():
        outcome: dict[str, Any] = json.loads(out.read_text())
    else:
        outcome = {"figures": {}, "errors": {"driver": f"exit code {code}, no figures"}}
    if left:
        outcome.setdefault("errors", {})["left_over"] = f"killed {left}"
    return outcome


def median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [run["figures"][key] for run in runs if run["figures"].get(key) is not None]
    return statistics.median(values) if values else None


def cell(runs: list[dict[str, Any]], row: Row, jobs: int) -> str:
    value = median(runs, row.key)
    if value is None:
        if row.key == "bulk" and runs and all("bulk" in run["figures"] for run in runs):
            return "n/a"
        return "failed"
    text = f"{value:,.0f}" if value >= 100 or row.key == "fairness_position" else f"{value:.1f}"
    if row.key.startswith("drain"):
        done = row.key.replace("rate", "done")
        least = min(int(run["figures"].get(done, jobs)) for run in runs)
        if least < jobs:
            text += f" ({least:,} ran)"
    if row.key.startswith("latency"):
        trend = median(runs, "latency_trend")
        if trend is not None and trend > 3:
            text += " (behind)"  # see the notes under the table
    return text


def best(medians: dict[str, float | None], row: Row) -> tuple[list[str], float] | None:
    known = {queue: value for queue, value in medians.items() if value is not None}
    if not known:
        return None
    value = max(known.values()) if row.higher_is_better else min(known.values())
    return [queue for queue, v in known.items() if v == value], value


def table(results: dict[str, list[dict[str, Any]]], jobs: int) -> list[str]:
    queues = [queue for queue in QUEUES if queue in results]
    peers = [queue for queue in queues if queue != "fairque"]
    header = ["figure", *queues, "best peer", "fairque vs best peer"]
    lines = ["| " + " | ".join(header) + " |", "|---" + "|---:" * (len(header) - 1) + "|"]
    for row in rows(jobs):
        unit = f" ({row.unit})" if row.unit else ""
        cells = [row.label + unit, *(cell(results[queue], row, jobs) for queue in queues)]
        winner = best({queue: median(results[queue], row.key) for queue in peers}, row)
        ours = median(results["fairque"], row.key) if "fairque" in results else None
        if winner is None:
            cells += ["-", "-"]
        else:
            names, value = winner
            cells.append(", ".join(names))
            if ours is None or not value or not ours:
                cells.append("-")
            else:  # above 1: fairque ahead, whichever way the figure counts
                cells.append(f"{ours / value if row.higher_is_better else value / ours:.2f}x")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", default=",".join(QUEUES))
    parser.add_argument("--repeat", type=int, default=3, help="runs per queue (medians)")
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per enqueue and drain run")
    parser.add_argument("--latency-jobs", type=int, default=200)
    parser.add_argument(
        "--drain-cap",
        type=float,
        default=8.0,
        help="seconds a drain may take (a slower queue is measured on the jobs it ran)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per driver run")
    parser.add_argument("--cache", type=Path, default=CACHE)
    options = parser.parse_args()
    queues = options.queues.split(",")
    unknown = set(queues) - set(QUEUES)
    if unknown:
        parser.error(f"unknown queues {sorted(unknown)}; known: {', '.join(QUEUES)}")
    started = datetime.now(timezone.utc)
    stamp = started.strftime("%Y%m%d-%H%M%S")
    folder = options.cache / f"run-{stamp}"
    (folder / "logs").mkdir(parents=True)
    pythons = {queue: venv_python(queue, options.cache) for queue in queues}
    uptime_before = subprocess.run(["uptime"], capture_output=True, text=True, check=False)
    results: dict[str, list[dict[str, Any]]] = {queue: [] for queue in queues}
    loads: list[float] = []
    with redis_server() as (url, redis_version):
        print(f"redis-server {redis_version} at {url}; runs in {folder}", flush=True)
        for repeat in range(options.repeat):
            order = queues[repeat % len(queues) :] + queues[: repeat % len(queues)]
            for queue in order:
                began = time.monotonic()
                outcome = drive(
                    queue, pythons[queue], url, options, label=f"r{repeat + 1}", folder=folder
                )
                load = os.getloadavg()[0]
                loads.append(load)
                outcome["load_after"] = load
                results[queue].append(outcome)
                errors = outcome.get("errors") or {}
                print(
                    f"{queue} run {repeat + 1}: {time.monotonic() - began:.0f} s, "
                    f"load {load:.2f}{'; errors: ' + str(errors) if errors else ''}",
                    flush=True,
                )
    uptime_after = subprocess.run(["uptime"], capture_output=True, text=True, check=False)
    elapsed = (datetime.now(timezone.utc) - started).total_seconds()
    abouts: dict[str, dict[str, Any]] = {
        queue: next((run["about"] for run in runs if "about" in run), {})
        for queue, runs in results.items()
    }
    lines = [
        f"{started:%Y-%m-%d %H:%M} UTC, {elapsed / 60:.1f} min, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, Redis {redis_version} on loopback "
        f"(--save '' --appendonly no), medians of {options.repeat}",
        f"uptime before: {uptime_before.stdout.strip()}",
        f"uptime after:  {uptime_after.stdout.strip()}",
        f"load average (1 min) after each driver run: min {min(loads):.2f}, "
        f"median {statistics.median(loads):.2f}, max {max(loads):.2f}",
        "",
        *table(results, options.jobs),
        "",
        f"(N ran): that drain ran into its {options.drain_cap:.0f} s cap (fewest jobs run in a "
        "repetition); the rate counts the jobs that ran. (behind): that worker ran fewer jobs "
        "than the one every 20 ms pushed, so its latency includes waiting behind earlier "
        "jobs. Fairness: 1 worker process; ratios above 1 mean fairque is ahead.",
        "",
    ]
    for queue in queues:
        about = abouts[queue]
        lines.append(
            f"- {queue} {about.get('version', '?')}: {about.get('model', '?')}; enqueue "
            f"{about.get('enqueue_api', '?')}; bulk {about.get('bulk_api') or 'n/a'}; "
            f"fairness: {about.get('fairness', '?')}"
        )
    print("\n".join(lines))
    report = {
        "started": started.isoformat(),
        "elapsed_s": elapsed,
        "command": sys.argv,
        "options": {key: str(value) for key, value in vars(options).items()},
        "redis": redis_version,
        "uptime_before": uptime_before.stdout.strip(),
        "uptime_after": uptime_after.stdout.strip(),
        "loads_after_each_run": loads,
        "versions": {
            queue: freeze(queue, python, options.cache) for queue, python in pythons.items()
        },
        "about": abouts,
        "runs": results,
        "medians": {
            queue: {row.key: median(runs, row.key) for row in rows(options.jobs)}
            for queue, runs in results.items()
        },
        "table": lines,
    }
    path = options.cache / f"results-{stamp}.json"
    path.write_text(json.dumps(report, indent=1))
    print(f"\nraw figures: {path}")


if __name__ == "__main__":
    main()
