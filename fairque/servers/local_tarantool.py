"""A throwaway Tarantool on a free loopback port, for tests, benchmarks and trying things.

>>> with LocalTarantool() as server:  # doctest: +SKIP
...     storage = TarantoolStorage(server.url)

It runs ``tarantool_instance.lua`` (WAL on) in a data folder of its own (or the one
given), and is stopped by its PID. :meth:`kill` and :meth:`start` again on the same
folder and port model a crash and a restart.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from fairque.closing import Closeable
from fairque.errors import FairQueueError
from fairque.servers.embedded import free_port

START_TIMEOUT = 30.0  # seconds for the server to answer after it was started
STOP_TIMEOUT = 10.0
# Linux's setpriv (util-linux) makes the server get SIGTERM, a clean stop, if the process
# that started it dies without stopping it: a server never outlives a killed
# `fairque tarantool` or test. Where there is none, the server is stopped by close() only.
_SETPRIV = shutil.which("setpriv") if sys.platform.startswith("linux") else None
_DIE_WITH_US = (_SETPRIV, "--pdeathsig", "TERM") if _SETPRIV else ()
REFUSAL = "fairque tarantool: "  # how the instance file starts the line it refuses with


class TarantoolNotStarted(FairQueueError):  # noqa: N818
    """The tarantool binary is missing, or did not answer in time."""


def find_binary() -> str | None:
    return shutil.which("tarantool")


def greets(port: int, host: str = "127.0.0.1") -> bool:
    """True once the server accepts a connection and sends its greeting (one listening on
    every address is asked on loopback)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)  # noqa: S104
    try:
        with socket.create_connection((host, port), timeout=1.0) as conn:
            return conn.recv(9) == b"Tarantool"
    except OSError:
        return False


class LocalTarantool(Closeable):
    """A Tarantool server process this object started (on 127.0.0.1 and a free port
    unless told otherwise)."""

    def __init__(
        self,
        binary: str | None = None,
        data_dir: str | Path | None = None,
        *,
        user: tuple[str, str] | None = None,
        memory_mib: int | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
    ) -> None:
        found = binary or find_binary()
        if found is None:
            raise TarantoolNotStarted("no tarantool binary (Debian: apt-get install tarantool)")
        self.binary = found
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir or tempfile.mkdtemp(prefix="fairque-tarantool-"))
        self.host = host
        self.port = free_port() if port is None else port
        self.user = user  # (name, password) clients log in with; guest if None
        self.memory_mib = memory_mib  # memtx_memory; the instance file's default if None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``host:port`` (``[host]:port`` for IPv6), where it listens."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def url(self) -> str:
        login = f"{quote(self.user[0])}:{quote(self.user[1])}@" if self.user else ""
        return f"tarantool://{login}{self.address}"

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def open(self) -> LocalTarantool:
        """Starts it: ``with LocalTarantool() as server`` (:meth:`close` stops it)."""
        return self.start()

    def start(self) -> LocalTarantool:
        """Starts the server (on the same folder and port as before, after a stop or
        kill) and waits until it answers."""
        instance = resources.files(__package__).joinpath("tarantool_instance.lua")
        env = {
            **os.environ,
            "FAIRQUE_TARANTOOL_LISTEN": self.address,
            "FAIRQUE_TARANTOOL_DIR": str(self.data_dir),
        }
        for name in (
            "FAIRQUE_TARANTOOL_USER",
            "FAIRQUE_TARANTOOL_PASSWORD",
            "FAIRQUE_TARANTOOL_MEMORY",
        ):
            env.pop(name, None)
        if self.memory_mib is not None:
            env["FAIRQUE_TARANTOOL_MEMORY"] = str(self.memory_mib)
        if self.user:
            env["FAIRQUE_TARANTOOL_USER"], env["FAIRQUE_TARANTOOL_PASSWORD"] = self.user
        errors = self.data_dir / "stderr.log"
        if shutil.which(self.binary) is None:  # said here: setpriv would say it in its log
            raise TarantoolNotStarted(f"cannot run {self.binary}: not an executable file")
        with resources.as_file(instance) as path, errors.open("wb") as stderr:
            try:
                self.process = subprocess.Popen(
                    [*_DIE_WITH_US, self.binary, str(path)],
                    cwd=self.data_dir,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                )
            except OSError as exc:
                raise TarantoolNotStarted(f"cannot run {self.binary}: {exc.strerror}") from None
            deadline = time.monotonic() + START_TIMEOUT
            while not greets(self.port, self.host):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise TarantoolNotStarted(
                        f"tarantool did not start on {self.address}: {self.last_words()}"
                    )
                time.sleep(0.02)  # polling the port, bounded by the deadline above
        return self

    def last_words(self) -> str:
        """Why the server ended: the instance file's own line on stderr, or the last error
        in its log."""
        said = (self.data_dir / "stderr.log").read_text(errors="replace").splitlines()
        refusals = [line for line in said if line.startswith(REFUSAL)]
        if refusals:
            return refusals[-1].removeprefix(REFUSAL)
        log = self.data_dir / "tarantool.log"
        lines = log.read_text(errors="replace").splitlines() if log.exists() else []
        for level in (" !> ", " E> ", " F> "):  # the cause first: F> says only that it ended
            said_so = [line for line in lines if level in line]
            if said_so:
                return said_so[-1]
        return (lines or said or ["no word in its log"])[-1]

    def admin(self, lua: str) -> str:
        """Runs one line of Lua as admin, on the console the instance opens on
        ``admin.sock`` in its data folder; returns the console's YAML answer."""
        with socket.socket(socket.AF_UNIX) as console:
            console.settimeout(STOP_TIMEOUT)
            console.connect(str(self.data_dir / "admin.sock"))
            greeting = b""
            while greeting.count(b"\n") < 2:  # the console's two greeting lines
                greeting += console.recv(4096)
            console.sendall(lua.replace("\n", " ").encode() + b"\n")
            answer = b""
            while not answer.endswith(b"\n...\n"):
                chunk = console.recv(65536)
                if not chunk:
                    break
                answer += chunk
        return answer.decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL: the process ends at once, as in a crash."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self._reap()

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it has not ended within STOP_TIMEOUT."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
        self._reap()

    def _reap(self) -> None:
        if self.process is not None:
            self.process.wait()
        self.process = None

    def close(self) -> None:
        """Stops the server and removes the data folder if this object made it."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
