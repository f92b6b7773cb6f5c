"""BullMQ in the benchmark of peers: its worker command and its client calls.

BullMQ is a Node library: its side lives in ``bullmq/`` (``package.json`` pins it,
``package-lock.json`` pins the rest; run.py installs them with ``npm ci`` into the
queue's cache folder and hands the driver ``NODE_PATH``). The job is the Python peers'
one, replicated in ``bullmq/common.js``: one EVALSHA of ``peers_job.RECORD``, whose text
and keys this module hands to every Node process, so that the SHA is the same.

The client calls go to ``bullmq/producer.js``, started once per driver run and kept
running: each ``enqueue`` is one JSON line on its stdin (``Queue.add`` once per entry,
one after the other) and one line back, so the timings hold BullMQ's calls, not Node's
start. The latency run's entries ("lat <push time>") get their push time from the
producer's clock just before ``Queue.add``, as the driver takes it just before the
other peers' push calls: the pipe's round trip (~0.5 ms on a busy 2-core VM) is not
BullMQ's. Every Node process runs in a session of its own and is stopped by its PID.
Only the standard library and redis-py (through ``peers_job``) are needed here.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from peers_job import KEYS, RECORD, URL_VARIABLE, Workers

HERE = Path(__file__).resolve().parent / "bullmq"
QUEUE = "peers"  # as in bullmq/common.js
LATENCY = "lat "  # the latency run's entries: "lat <push time>" (driver.Harness.latency)
SCRIPT_VARIABLE, KEYS_VARIABLE = "PEERS_RECORD_SCRIPT", "PEERS_RECORD_KEYS"
CONCURRENCY_VARIABLE = "PEERS_CONCURRENCY"  # worker.js's, 10 where unset
ANSWER_TIMEOUT = 300.0  # seconds for one producer call (thousands of Queue.add calls)
START_TIMEOUT = 60.0  # seconds for the producer to connect and say it is ready


def node() -> str:
    found = shutil.which("node")
    if found is None:
        raise RuntimeError("node is needed for the BullMQ peer")
    return found


def node_env(url: str) -> dict[str, str]:
    """What every Node process of this peer reads: the server, the job's script and keys."""
    node_path = os.environ.get("NODE_PATH", "")
    if not node_path or not (Path(node_path) / "bullmq" / "package.json").exists():
        raise RuntimeError(
            f"NODE_PATH={node_path!r} holds no bullmq: run.py installs it (npm ci) and sets it"
        )
    return {
        URL_VARIABLE: url,
        SCRIPT_VARIABLE: RECORD,
        KEYS_VARIABLE: json.dumps(KEYS),
        "NODE_PATH": node_path,
    }


class Producer:
    """``node producer.js`` in a session of its own: one JSON line each way per call."""

    def __init__(self, url: str) -> None:
        self.process = subprocess.Popen(
            [node(), str(HERE / "producer.js")],
            cwd=HERE,
            env={**os.environ, **node_env(url)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # its own process group, led by its PID
        )
        self.buffer = b""
        try:
            self.ready = self.answer(START_TIMEOUT)
        except BaseException:
            self.stop()
            raise
        if not self.ready.get("ready"):
            self.stop()
            raise RuntimeError(f"the BullMQ producer did not start: {self.ready}")

    def answer(self, timeout: float) -> dict[str, Any]:
        """The producer's next line, waited for at most ``timeout`` seconds."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer from the BullMQ producer in {timeout:.0f} s")
            readable, _, _ = select.select([fd], [], [], left)
            if readable:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    code = self.process.poll()
                    raise RuntimeError(f"the BullMQ producer exited (code {code})")
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        value: dict[str, Any] = json.loads(line)
        return value

    def call(self, op: str, entries: Sequence[str] = (), *, restamp: bool = False) -> int:
        assert self.process.stdin is not None
        command = {"op": op, "entries": list(entries), "restamp": restamp}
        self.process.stdin.write(json.dumps(command).encode())
        self.process.stdin.write(b"\n")
        self.process.stdin.flush()
        reply = self.answer(ANSWER_TIMEOUT)
        if "error" in reply:
            raise RuntimeError(f"BullMQ producer: {reply['error']}")
        return int(reply["ok"])

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM (Queue.close(), then exit), then SIGKILL of its group, by its PID."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=grace)
        with contextlib.suppress(ProcessLookupError):  # nothing left of it
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()


class BullmqPeer:
    name = "bullmq"
    enqueue_api = "Queue.add (a Node producer kept running, one stdin line per driver call)"
    bulk_api: str | None = "Queue.addBulk (one pipeline, not atomic)"
    fairness = (
        "none in open-source BullMQ (its groups are BullMQ Pro's): every tenant's jobs go "
        "to one FIFO queue"
    )

    def __init__(self, url: str) -> None:
        self.url = url
        self.producer = Producer(url)
        ready = self.producer.ready
        self.version = str(ready.get("bullmq", "?"))
        self.model = (
            f"Node {ready.get('node', '?')}, ioredis {ready.get('ioredis', '?')}: a BullMQ "
            "Worker at concurrency 10 per process (`node worker.js` once per process)"
        )

    def prepare(self) -> None:
        """Nothing to declare: BullMQ makes its keys on the first add."""

    def enqueue(self, entries: Sequence[str], tenant: str | None = None) -> None:
        # tenant: no such thing (see ``fairness``)
        latency = bool(entries) and all(entry.startswith(LATENCY) for entry in entries)
        self.producer.call("add", entries, restamp=latency)

    def enqueue_bulk(self, entries: Sequence[str], tenant: str | None = None) -> None:
        self.producer.call("bulk", entries)

    def workers(
        self, processes: int, tenants: Sequence[str] | None = None, concurrency: int | None = None
    ) -> Workers:
        command = [node(), str(HERE / "worker.js")]
        env = node_env(self.url)
        if concurrency is not None:
            env[CONCURRENCY_VARIABLE] = str(concurrency)
        return Workers([command] * processes, env=env, grace=10.0)

    def close(self) -> None:
        self.producer.stop()


def make_peer(url: str) -> BullmqPeer:
    return BullmqPeer(url)
