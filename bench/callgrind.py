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

import re
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import redis


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

    def dumped(self, label: str) -> int:
        """The instructions of the dump written by ``-d label`` (the file is removed)."""
        for dump in self.folder.glob("callgrind.out.*"):
            text = dump.read_text(errors="replace")
            if re.search(rf"^desc: Trigger: dump {label}$", text, re.M):
                totals = re.search(r"^totals: (\d+)", text, re.M)
                dump.unlink()
                if totals:
                    return int(totals.group(1))
        raise RuntimeError(f"callgrind wrote no dump for {label} in {self.folder}")


class Counting:
    """Counts ``servers`` together, from :meth:`on` to :meth:`off` (their sum)."""

    def __init__(self, servers: Sequence[Counted]) -> None:
        self.servers = list(servers)
        self.started = 0.0

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
        return sum(server.dumped(label) for server in self.servers), seconds

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
