"""JQ master figures on a throwaway embedded Valkey, with real master and worker processes.

    uv run python bench/bench_master.py [--jobs 2000] [--workers 2] [--clients 16]

Prints, never asserts: enqueue/s over HTTP (MessagePack bodies, ``--clients`` concurrent
connections to one ``fairque master`` process; one job per request, then ``--batch``
per request), then end-to-end jobs/s: the same number
of no-op jobs pushed, dispatched to ``--workers`` ``fairque http-worker`` processes and
their result objects recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec

from fairque import FairQueue
from fairque.servers.embedded import LocalServer

BENCH = Path(__file__).parent
MSGPACK = {"content-type": "application/msgpack", "accept": "application/msgpack"}
CLI = [sys.executable, "-c", "from fairque.cli import main; main()"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait(probe: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark condition not met")
        time.sleep(0.02)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code < 500
    except httpx.HTTPError:
        return False


@contextmanager
def processes(commands: list[list[str]]) -> Iterator[list[int]]:
    """Runs ``commands`` until the block ends; yields their pids."""
    env = {**os.environ, "PYTHONPATH": str(BENCH)}
    started = [subprocess.Popen(command, env=env) for command in commands]
    try:
        yield [process.pid for process in started]
    finally:
        for process in started:
            process.terminate()
        for process in started:
            process.wait(timeout=30)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux ``/proc``; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def finished(queue: FairQueue) -> int:
    """The namespace's finished counter, read alone from the server: the master's
    ``/overview`` costs it ~1.1 ms of CPU, which polling every 20 ms would add to the
    master's CPU per job (~6% of it at 2,500 jobs/s)."""
    return int(queue.redis.hget(queue.namespace.key("stats"), "finished") or 0)


def get(master: str, path: str) -> Any:
    return msgspec.msgpack.decode(httpx.get(master + path, headers=MSGPACK).content)


class Connection:
    """One keep-alive HTTP/1.1 connection that sends a fixed request and reads answers.

    A load generator, not a client library: httpx spends ~1.5 ms of CPU per request here,
    more than the master itself, so with it the benchmark measured its own client."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, url: str) -> Connection:
        address = httpx.URL(url)
        return cls(*await asyncio.open_connection(address.host, address.port))

    async def send(self, request: bytes) -> tuple[int, bytes]:
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


def post_request(path: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: {MSGPACK['content-type']}\r\n"
        f"accept: {MSGPACK['accept']}\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def push(master: str, jobs: int, clients: int, batch: int = 1) -> float:
    """Seconds to enqueue ``jobs`` no-op jobs over ``clients`` connections (one request
    in flight on each), one per request or ``batch`` per ``POST /jobs/batch``."""
    path, job = (
        ("/jobs", {"name": "noop"}) if batch == 1 else ("/jobs/batch", [{"name": "noop"}] * batch)
    )
    request = post_request(path, msgspec.msgpack.encode(job))
    connections = [await Connection.open(master) for _ in range(clients)]

    async def client(connection: Connection, count: int) -> None:
        for _ in range(count):
            status, body = await connection.send(request)
            if status != 201:
                raise RuntimeError(f"HTTP {status}: {body!r}")

    try:
        started = time.perf_counter()
        requests = jobs // batch
        share = [requests // clients + (i < requests % clients) for i in range(clients)]
        await asyncio.gather(*(client(c, n) for c, n in zip(connections, share, strict=True)))
        return time.perf_counter() - started
    finally:
        for connection in connections:
            connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--capacity", type=int, default=32, help="jobs per worker at once")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--batch", type=int, default=100, help="jobs per POST /jobs/batch")
    options = parser.parse_args()
    with LocalServer() as server:
        server_pid = server.process.pid if server.process else 0
        port = free_port()
        master = f"http://127.0.0.1:{port}"
        serve = [*CLI, "master", "--url", server.url, "--port", str(port)]
        with processes([serve]) as pids:
            wait(lambda: answers(master + "/overview"), timeout=60)
            master_cpu = cpu_seconds(pids[0])
            seconds = asyncio.run(push(master, options.jobs, options.clients))
            master_cpu = cpu_seconds(pids[0]) - master_cpu
            print(f"enqueue over HTTP: {options.jobs / seconds:,.0f} jobs/s "
                  f"({options.jobs} jobs, {options.clients} clients; "
                  f"master CPU {master_cpu / options.jobs * 1e6:,.0f} us per job)")  # fmt: skip
            batched = options.jobs * 10
            seconds = asyncio.run(push(master, batched, options.clients, options.batch))
            print(f"enqueue over HTTP in batches of {options.batch}: {batched / seconds:,.0f} "
                  f"jobs/s ({batched} jobs)")  # fmt: skip

        namespace = f"bench-{uuid.uuid4().hex[:8]}"
        serve = [*CLI, "master", "--url", server.url, "--namespace", namespace, "--port", str(port)]
        workers = [
            [*CLI, "http-worker", "--master", master, "--tasks", "bench_tasks", "--port",
             str(free_port()), "--capacity", str(options.capacity), "--worker-id", f"w{i}"]
            for i in range(options.workers)
        ]  # fmt: skip
        with processes([serve, *workers]) as pids:
            wait(lambda: answers(master + "/overview"), timeout=60)
            wait(lambda: len(get(master, "/workers")) == options.workers, timeout=60)
            measured = {"master": pids[:1], "workers": pids[1:], "server": [server_pid],
                        "load generator": [os.getpid()]}  # fmt: skip
            before = {kind: sum(map(cpu_seconds, group)) for kind, group in measured.items()}
            started = time.perf_counter()
            asyncio.run(push(master, options.jobs, options.clients))
            with FairQueue(server.url, namespace) as queue:  # jobs share the counters
                wait(lambda: finished(queue) >= options.jobs, 600)
            seconds = time.perf_counter() - started
            used = {kind: sum(map(cpu_seconds, group)) - before[kind]
                    for kind, group in measured.items()}  # fmt: skip
            rate = options.jobs / seconds
            shape = f"{options.jobs} jobs, {options.workers} workers x {options.capacity}"
            print(f"end to end through HTTP workers: {rate:,.0f} jobs/s ({shape})")
            print("  CPU per job: " + ", ".join(
                f"{kind} {used[kind] / options.jobs * 1e6:,.0f} us" for kind in measured
            ))  # fmt: skip


if __name__ == "__main__":
    main()
