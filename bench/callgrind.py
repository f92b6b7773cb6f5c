"""Servers under callgrind whose instructions are counted only around the work.

A server started by :class:`CountedServer` runs under ``valgrind --tool=callgrind
--instr-atstart=no``: it counts nothing until ``callgrind_control -i on`` and stops at
``-i off``; ``-d LABEL`` then writes the counts to a file in the server's folder, read
and removed here. The counts are the server's instructions (scripts, commands, protocol,
replies; not the kernel's share of the network) and repeat within a few percent, unlike
timings on a shared VM. A server under valgrind runs ~50x slower: the figures are counts,
never rates.

Standard library and redis-py only: the peers' drivers import it in their own venvs
(``bench/peers/counting.py``), where a :class:`Counted` names a server by its PID, port
and folder (``spec``), counted from whichever process holds it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import redis

# Where a server works for its clients: reading and running their commands (the scripts
# in them), a blocked client's commands run once it is unblocked, accepting connections,
# and looking at each client ten times a second. Each is called by the event loop itself,
# none inside another. What the server does for itself is left out: its cron, its expiry
# cycle, and above all its event loop's turns, whose count a second swings with the
# phases of its two timers (~8k instructions a second between two windows of one bare
# server, as much as an idle worker costs).
CLIENT_WORK = ("connSocketEventHandler", "connSocketAcceptHandler", "processUnblockedClients",
               "clientsTimeProc")  # fmt: skip
# A folder to keep each dump in (as ``<port>-<label>``, for ``callgrind_annotate``), when set.
KEEP_DUMPS = os.environ.get("FAIRQUE_BENCH_KEEP_DUMPS")
_ANNOTATED = re.compile(r"^\s*([\d,]+) \(.*?\)\s+\S*?:(\w+)[ \n]", re.M)


def client_work(dump: Path) -> int:
    """The instructions of a callgrind dump under :data:`CLIENT_WORK` (inclusive; of a
    function listed under more than one file, as inlined code is, the largest)."""
    annotated = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(dump)],
        check=True, capture_output=True, text=True, timeout=300,
    ).stdout  # fmt: skip
    found: dict[str, int] = {}
    for count, function in _ANNOTATED.findall(annotated):
        if function in CLIENT_WORK:
            found[function] = max(found.get(function, 0), int(count.replace(",", "")))
    return sum(found.values())


@dataclass(frozen=True)
class Counted:
    """A server running under callgrind: its PID, its port and its folder (the dumps')."""

    pid: int
    port: int
    folder: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def spec(self) -> str:
        """``PID:PORT:FOLDER``, for another process's :meth:`from_spec`."""
        return f"{self.pid}:{self.port}:{self.folder}"

    @classmethod
    def from_spec(cls, spec: str) -> Counted:
        pid, port, folder = spec.split(":", 2)
        return cls(int(pid), int(port), Path(folder))

    def control(self, *arguments: str) -> None:
        subprocess.run(
            ["callgrind_control", *arguments, str(self.pid)],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def dumped(self, label: str, clients: bool = False) -> tuple[int, int]:
        """The instructions of the dump written by ``-d label`` (the file is removed, or
        kept in :data:`KEEP_DUMPS`), and
        with ``clients`` those of its :data:`CLIENT_WORK` (else 0)."""
        for dump in self.folder.glob("callgrind.out.*"):
            text = dump.read_text(errors="replace")
            if re.search(rf"^desc: Trigger: dump {label}$", text, re.M):
                totals = re.search(r"^totals: (\d+)", text, re.M)
                work = client_work(dump) if clients else 0
                if KEEP_DUMPS:
                    shutil.move(dump, Path(KEEP_DUMPS) / f"{self.port}-{label}")
                else:
                    dump.unlink()
                if totals:
                    return int(totals.group(1)), work
        raise RuntimeError(f"callgrind wrote no dump for {label} in {self.folder}")


class Counting:
    """Counts ``servers`` together, from :meth:`on` to :meth:`off` (their sum)."""

    def __init__(self, servers: Sequence[Counted]) -> None:
        self.servers = list(servers)
        self.started = 0.0
        self.clients = False  # off() also counts the servers' CLIENT_WORK, in client_work
        self.client_work = 0

    def on(self) -> None:
        for server in self.servers:
            server.control("-z")
            server.control("-i", "on")
        self.started = time.monotonic()

    def off(self, label: str) -> tuple[int, float]:
        """(instructions of every server since :meth:`on`, seconds of wall time)."""
        seconds = time.monotonic() - self.started
        for server in self.servers:
            server.control("-i", "off")
        for server in self.servers:
            server.control("-d", label)
        counts = [server.dumped(label, self.clients) for server in self.servers]
        self.client_work = sum(work for _, work in counts)
        return sum(total for total, _ in counts), seconds

    def measure(self, label: str, work: Callable[[], object]) -> int:
        """Instructions the servers executed while ``work`` ran."""
        self.on()
        work()
        return self.off(label)[0]


class CountedServer:
    """A throwaway server under callgrind on ``port``, keeping its files in ``folder``."""

    def __init__(self, binary: str, folder: Path, port: int, options: Sequence[str] = ()) -> None:
        self.port = port
        self.folder = folder
        valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                    f"--callgrind-out-file={folder / 'callgrind.out'}"]  # fmt: skip
        server = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                  "--appendonly", "no", "--dir", str(folder), *options]  # fmt: skip
        self.process = subprocess.Popen(
            valgrind + server, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.counted = Counted(self.process.pid, port, folder)
        self.url = self.counted.url
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 120  # valgrind starts the server slowly
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    self.stop()
                    raise RuntimeError("the server did not start under valgrind") from None
                time.sleep(0.2)
            finally:
                client.close()

    def measure(self, label: str, work: Callable[[], object]) -> int:
        """Instructions the server executed while ``work`` ran."""
        return Counting([self.counted]).measure(label, work)

    def stop(self) -> None:
        """Stops the server (the process started here, by its PID)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=60)
