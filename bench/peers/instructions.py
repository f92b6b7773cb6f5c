"""Server instructions per job: fairque, BullMQ, Dramatiq and the bare commands, side by side.

    uv run python bench/peers/instructions.py [--queues fairque,bullmq,dramatiq,bare]
        [--jobs 2000] [--rows enqueue,bulk,process10,process1,life,idle,idle_shards,
        idle_names] [--repeat 2] [--idle-seconds 20]

Counts what each queue costs the server, the resource every deployment runs out of
first, on the embedded Valkey under ``valgrind --tool=callgrind`` (``bench/callgrind.py``),
counting only around the work. Each queue gets a fresh server; the peers' venvs and
worker commands are run.py's and driver.py's (a queue's own worker, as a user starts
it), and ``counting.py`` counts the rows in the queue's venv. Every figure is:

- the server's instructions from the work's start to its end (for the process rows, from
  the worker's start until every job pushed before it ran; for a job's life, one-call
  pushes while the worker runs them), less the bare server's own rate (its timers,
  counted with nothing running) times the window's wall time;
- for 2N jobs minus that for N jobs, over N, so that a start-up's and a stop's cost
  cancel (N = ``--jobs``); the idle rows count a warmed-up worker for ``--idle-seconds``
  of wall time instead (from 40 s after its last job), per second: the server's work for
  its clients (``callgrind.CLIENT_WORK``: their commands, connections and cron) less that
  of a window as long counted right after the worker stopped, with the data it left (the
  whole servers' rates are printed too: their difference swings ~8k a second with the
  event loop's turns; the commands per second are printed, with the commands scripts run
  counted as ``INFO commandstats`` counts them);
- counted ``--repeat`` times: every count is printed, and the spread.

fairque spreads the jobs over 50 tenants; BullMQ and Dramatiq use one plain queue. The
job is the peers' one (``peers_job.RECORD``: one script call of its own), and the bare
commands run it too: ``bench_floor.py``'s functions (only the commands a job's life
needs) pushing, popping and finishing, one worker loop in this process. fairque's idle
worker is also counted on a namespace sharded over a cluster of 3 masters (3 counted
servers, summed) and serving 5 task names (``fairque_noops.py``). A server under
valgrind runs ~50x slower: the figures are counts, never rates. A run with the defaults
takes ~20 minutes on a 2-core VM; each window's raw counts and every worker's log are
kept under ``~/.cache/fairque-bench-peers/instructions-<time>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench_floor.py, callgrind.py

import redis
from bench_floor import FLOOR_LIBRARY, floor_finish, floor_pop, floor_push
from callgrind import CountedServer, Counting
from counting import Figure, Meter, Window, attempt, outcome, per_job
from driver import SERVER_DIR_PREFIX, stop
from fairque_noops import NAMES_VARIABLE
from peers_job import KEYS, RECORD
from redis.cluster import RedisCluster
from run import CACHE, run_in_venv, venv_python

from fairque import FairQueue, ShardedQueue, Task
from fairque.servers.embedded import free_port, valkey_binary
from fairque.servers.local_cluster import cli_for

HERE = Path(__file__).resolve().parent
QUEUES = {"fairque": "fairque", "bullmq": "BullMQ", "dramatiq": "Dramatiq", "bare": "bare commands"}
LABELS = {
    "enqueue": "enqueue, one job per call",
    "bulk": "enqueue in bulk (1,000 per call)",
    "process10": "process, worker at concurrency 10",
    "process1": "process, worker at concurrency 1",
    "life": "a job's life: one-call enqueue + default worker",
    "idle": "an idle worker, per second",
    "idle_shards": "an idle worker, sharded over 3 masters, per second",
    "idle_names": "an idle worker serving 5 task names, per second",
}
SHARDS, NAMES = 3, 5
SCRIPT_CALLS = {"fcall", "fcall_ro", "evalsha", "eval", "evalsha_ro", "eval_ro"}


@contextmanager
def counted_servers(count: int = 1, cluster: bool = False) -> Iterator[list[CountedServer]]:
    """``count`` fresh servers under callgrind (a cluster of that many masters), stopped
    by their PIDs at the end."""
    binary = str(valkey_binary())
    with ExitStack() as stack:
        servers = []
        for _ in range(count):
            folder = Path(tempfile.mkdtemp(prefix=SERVER_DIR_PREFIX))
            stack.callback(shutil.rmtree, folder, ignore_errors=True)
            options = ["--cluster-enabled", "yes", "--cluster-port", str(free_port())]
            server = CountedServer(binary, folder, free_port(), options if cluster else ())
            stack.callback(server.stop)
            servers.append(server)
        if cluster:
            nodes = [f"127.0.0.1:{server.port}" for server in servers]
            create = [cli_for(binary), "--cluster", "create", *nodes, "--cluster-yes"]
            subprocess.run(create, check=True, capture_output=True, timeout=600)
            clients = [redis.Redis.from_url(server.url) for server in servers]
            deadline = time.monotonic() + 300
            while any(c.cluster("INFO")["cluster_state"] != "ok" for c in clients):
                if time.monotonic() > deadline:
                    raise RuntimeError("the counted cluster did not come up in 300 s")
                time.sleep(0.5)
            for client in clients:
                client.close()
        yield servers


def peer(queue: str, options: argparse.Namespace) -> dict[str, Any]:
    """A peer's rows, counted by counting.py in the queue's venv on a fresh server."""
    python = venv_python(queue, options.cache)
    out = options.logs / f"{queue}.json"
    with counted_servers() as (server,):
        arguments = [str(HERE / "counting.py"), "--peer", queue, "--server",
                     server.counted.spec, "--jobs", str(options.jobs), "--repeat",
                     str(options.repeat), "--idle-seconds", str(options.idle_seconds),
                     "--rows", options.rows, "--logs", str(options.logs),
                     "--out", str(out)]  # fmt: skip
        code, left = run_in_venv(
            queue, python, arguments, cache=options.cache, log=options.logs / f"{queue}.log",
            timeout=options.timeout, pythonpath=(HERE, HERE.parent),
        )  # fmt: skip
    result = json.loads(out.read_text()) if out.exists() else outcome()
    if code or left:
        result["errors"]["driver"] = f"exit code {code}, killed {left}"
    return result


def bare(options: argparse.Namespace) -> dict[str, Any]:
    """The same rows with only the commands a job's life needs, run by one loop here."""
    with counted_servers() as (server,):
        client = redis.Redis.from_url(server.url)
        client.function_load(FLOOR_LIBRARY, replace=True)  # FLUSHALL keeps functions
        record = client.register_script(RECORD)
        meter = Meter(Counting([server.counted]), [client])
        result = outcome()
        result["idle_server"]["rows"] = meter.measure_idle(options.idle_seconds)

        def push(jobs: int, batch: int) -> None:
            for first in range(0, jobs, batch):
                floor_push(client, min(batch, jobs - first))

        def run(ids: list[bytes]) -> None:
            for _ in ids:
                record(keys=KEYS, args=[f"{time.time():.6f}", ""])
            floor_finish(client, ids)

        def drain(count: int) -> None:
            while ids := floor_pop(client, count):
                run(ids)

        def life(jobs: int) -> None:
            for _ in range(jobs):
                floor_push(client, 1)
                run(floor_pop(client, 1))

        def counted(work: Callable[[int], object], queued: bool = False) -> Figure:
            def count(jobs: int) -> Window:
                client.flushall()
                if queued:
                    push(jobs, 1000)
                meter.on()
                work(jobs)
                return meter.off()

            return per_job(count, options.jobs)

        rows = {
            "enqueue": counted(partial(push, batch=1)),
            "bulk": counted(partial(push, batch=1000)),
            "process10": counted(lambda _: drain(10), queued=True),
            "process1": counted(lambda _: drain(1), queued=True),
            "life": counted(life),
        }
        for row in options.rows.split(","):
            if row in rows:
                attempt(result, row, rows[row], options.repeat)
        client.close()
    return result


def fairque_idle(options: argparse.Namespace) -> dict[str, Any]:
    """fairque's idle worker of a namespace sharded over 3 masters, and of 5 task names."""
    result = outcome()
    for row, shards, names in (("idle_shards", SHARDS, 1), ("idle_names", 1, NAMES)):
        if row in options.rows.split(","):
            with counted_servers(shards, cluster=shards > 1) as servers:
                clients = [redis.Redis.from_url(server.url) for server in servers]
                meter = Meter(Counting([server.counted for server in servers]), clients)
                result["idle_server"][row] = meter.measure_idle(options.idle_seconds)
                figure = partial(idle_worker, row, servers, names, meter, options)
                attempt(result, row, figure, options.repeat)
                for client in clients:
                    client.close()
    return result


def idle_worker(
    row: str, servers: list[CountedServer], names: int, meter: Meter, options: argparse.Namespace
) -> tuple[float, dict[str, float]]:
    """``fairque worker`` of ``names`` task names (``fairque_noops.py``) on ``servers`` (a
    namespace of a shard on each, when more than one), warmed up, then counted idle."""
    shards = len(servers)
    if shards == 1:
        url, namespace = servers[0].url, "idle"
    else:
        url = "redis+cluster://" + ",".join(f"127.0.0.1:{server.port}" for server in servers)
        namespace = spread_namespace(servers, shards)
    fairque = str(Path(sys.executable).parent / "fairque")
    command = [fairque, "worker", "--tasks", "fairque_noops", "--url", url,
               "--namespace", namespace, "--shards", str(shards)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(HERE), NAMES_VARIABLE: str(names)}
    # A task of each name for a tenant on each shard: the warm-up visits every one.
    tenants = {zlib.crc32(f"t{i}".encode()) % shards: f"t{i}" for i in range(100)}
    queue = ShardedQueue(url, namespace, shards=shards) if shards > 1 else FairQueue(url, namespace)
    with (options.logs / f"fairque-{row}.log").open("ab") as log:
        process = subprocess.Popen(
            command, cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            for tenant in tenants.values():
                for name in [f"noop{index}" for index in range(names)]:
                    done = finished(queue) + 1
                    queue.push(Task(user_id=tenant, name=name))
                    deadline = time.monotonic() + 300
                    while finished(queue) < done:  # the worker's start, then each task
                        if time.monotonic() > deadline or process.poll() is not None:
                            raise RuntimeError(f"the warm-up did not run (see {log.name})")
                        time.sleep(0.1)
            queue.close()  # its connections are the warm-up's, not the worker's
            window = meter.idle_worker(options.idle_seconds)
        finally:
            stop([process], log, grace=60)
            queue.close()
    return meter.less_bare(window)


def finished(queue: FairQueue | ShardedQueue) -> int:
    return int(queue.stats().counters.get("finished", 0))


def spread_namespace(servers: list[CountedServer], shards: int) -> str:
    """A namespace whose ``shards`` shards each live on another master."""
    ports = [server.port for server in servers]
    with RedisCluster(host="127.0.0.1", port=ports[0]) as cluster:
        while True:
            name = f"idle-{uuid.uuid4().hex[:6]}"
            keys = [f"fq:{{{name}:{shard}}}:ring" for shard in range(shards)]
            if len({cluster.get_node_from_key(key).port for key in keys}) == shards:
                return name


def cell(figures: list[float] | None, unit: str) -> str:
    """The mean, every count and their spread (largest less smallest, over the mean)."""
    if not figures:
        return ""
    mean = sum(figures) / len(figures)
    counts = " / ".join(f"{figure / 1000:.1f}" for figure in figures)
    spread = (max(figures) - min(figures)) / mean * 100 if mean else 0.0
    return f"{mean / 1000:.1f}k{unit} ({counts}; {spread:.1f}%)"


def table(results: dict[str, dict[str, Any]], rows: list[str]) -> list[str]:
    queues = list(results)
    names = [QUEUES[queue] for queue in queues]
    for index, queue in enumerate(queues):
        if queue in {"bullmq", "dramatiq"}:  # fairque: this checkout (the commit above)
            names[index] += " " + ".".join(results[queue]["about"]["version"].split(".")[:2])
    lines = ["| server instructions | " + " | ".join(names) + " |",
             "|---" + "|--:" * len(queues) + "|"]  # fmt: skip
    for row in rows:
        unit = "/s" if row.startswith("idle") else ""
        cells = []
        for queue in queues:
            result = results[queue]
            figures = result["figures"].get(row)
            if figures is None and row == "bulk" and result["about"].get("bulk") is False:
                cells.append("n/a")
            elif figures is None and row in result["errors"]:
                cells.append("failed")
            else:
                cells.append(cell(figures, unit))
        if any(cells):
            lines.append(f"| {LABELS[row]} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", default=",".join(QUEUES))
    parser.add_argument("--jobs", type=int, default=2000, help="N: drains of N and 2N")
    parser.add_argument("--rows", default=",".join(LABELS))
    parser.add_argument("--repeat", type=int, default=2, help="counts of each figure")
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--timeout", type=float, default=7200.0, help="seconds per queue")
    parser.add_argument("--cache", type=Path, default=CACHE)
    options = parser.parse_args()
    queues = options.queues.split(",")
    rows = options.rows.split(",")
    if unknown := (set(queues) - set(QUEUES)) | (set(rows) - set(LABELS)):
        parser.error(f"unknown {sorted(unknown)}; queues {list(QUEUES)}, rows {list(LABELS)}")
    if shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind is needed (apt-get install valgrind)")
    started = datetime.now(timezone.utc)
    options.logs = options.cache / f"instructions-{started:%Y%m%d-%H%M%S}"
    options.logs.mkdir(parents=True)
    results: dict[str, dict[str, Any]] = {}
    for queue in queues:
        began = time.monotonic()
        results[queue] = bare(options) if queue == "bare" else peer(queue, options)
        if queue == "fairque":
            for key, values in fairque_idle(options).items():
                results[queue][key].update(values)
        errors = results[queue]["errors"]
        print(f"{queue}: {time.monotonic() - began:.0f} s, errors {errors}", flush=True)
    elapsed = (datetime.now(timezone.utc) - started).total_seconds()
    lines = [
        f"{started:%Y-%m-%d %H:%M} UTC, {elapsed / 60:.0f} min, fairque at {commit()}, "
        f"Valkey {valkey_version()} (embedded) under "
        f"callgrind, N = {options.jobs:,}, idle windows of {options.idle_seconds:.0f} s; "
        "each cell: the mean (every count in thousands; their spread)",
        "",
        *table(results, [row for row in LABELS if row in rows]),
        "",
        *notes(results),
    ]
    print("\n".join(lines))
    path = options.logs / "results.json"
    path.write_text(json.dumps({"command": sys.argv, "table": lines, "results": results}, indent=1))
    print(f"\nraw figures: {path}")


def output(*command: str) -> str:
    return subprocess.run(command, check=False, capture_output=True, text=True).stdout.strip()


def commit() -> str:
    """This checkout's commit, and whether its files differ from it."""
    changed = " (changed)" if output("git", "-C", str(HERE), "status", "--porcelain") else ""
    return output("git", "-C", str(HERE), "rev-parse", "--short", "HEAD") + changed


def valkey_version() -> str:
    words = output(str(valkey_binary()), "--version").split()
    return next((word[2:] for word in words if word.startswith("v=")), "?")


def notes(results: dict[str, dict[str, Any]]) -> list[str]:
    """What each queue ran, the bare servers' own rates, and the idle workers' commands."""
    lines = []
    for queue, result in results.items():
        idle = ", ".join(f"{rate / 1000:.1f}k/s ({'the rows' if group == 'rows' else group})"
                         for group, rate in result["idle_server"].items())  # fmt: skip
        model = result["about"].get("model", "one loop in the harness")
        lines.append(f"- {QUEUES[queue]}: {model}; the bare idle server: {idle}")
        scripts = []
        for row, calls in result["calls"].items():
            if row.startswith("idle"):
                listed = ", ".join(f"{name} {rate:.2f}" for name, rate in calls.items())
                lines.append(f"  - {LABELS[row]}: commands per second (scripts' too): {listed}")
            else:
                called = sum(count for name, count in calls.items() if name in SCRIPT_CALLS)
                scripts.append(f"{row} {called:.2f}")
        if scripts:
            lines.append(f"  - script calls per job (the job's own too): {', '.join(scripts)}")
    return lines


if __name__ == "__main__":
    main()
