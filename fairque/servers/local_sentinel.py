"""A throwaway Redis Sentinel set-up on loopback ports, for tests and demos: a primary, a
replica of it, and sentinels that watch them and promote the replica when the primary
is down.

Each process is a :class:`fairque.servers.embedded.LocalServer`; the sentinels run the
same binary with ``--sentinel``, each with its own configuration file in this object's
folder (a sentinel rewrites it as it learns of replicas, other sentinels and failovers).
Processes are stopped by the processes this object started, nothing else.

>>> with LocalSentinel() as sentinel:  # doctest: +SKIP
...     FairQueue(sentinel.url)
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import redis

from fairque.closing import Closeable
from fairque.errors import EmbeddedServerError
from fairque.servers.embedded import LocalServer, valkey_binary

START_TIMEOUT = 60.0
# A replica's first sync starts at once, not after the default 5 s wait for more
# replicas to share one RDB transfer.
DATA_OPTIONS = ("--repl-diskless-sync-delay", "0")


class LocalSentinel(Closeable):
    """A primary, its replica and ``sentinels`` sentinels on free 127.0.0.1 ports;
    ``url`` names the sentinels and the service.

    ``binary`` is the embedded Valkey by default, or e.g. Debian's ``redis-server``. The
    sentinels take the primary for down after ``down_after_ms`` without an answer; a
    majority of them then promotes the replica."""

    def __init__(
        self,
        binary: str | Path | None = None,
        *,
        service: str = "fairque",
        sentinels: int = 3,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 4000,
    ) -> None:
        self.binary = str(binary or valkey_binary())
        self.service = service
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.folder = Path(tempfile.mkdtemp(prefix="fairque-sentinel-"))
        self.primary = LocalServer(self.binary, options=DATA_OPTIONS)
        self.replica = LocalServer(self.binary, options=DATA_OPTIONS)  # --replicaof at start
        self.sentinels = [
            LocalServer(self.binary, options=["--sentinel"], config=self.folder / f"s{n}.conf")
            for n in range(sentinels)
        ]

    @property
    def nodes(self) -> list[LocalServer]:
        """The data nodes: the primary this set-up started with, and its replica."""
        return [self.primary, self.replica]

    @property
    def url(self) -> str:
        """``redis+sentinel://`` naming every sentinel and the service."""
        hosts = ",".join(f"127.0.0.1:{sentinel.port}" for sentinel in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}"

    def open(self) -> LocalSentinel:
        """Starts it: ``with LocalSentinel() as sentinel`` (:meth:`close` stops it)."""
        return self.start()

    def start(self, timeout: float = START_TIMEOUT) -> LocalSentinel:
        """Starts the primary, the replica and the sentinels, and waits until every
        sentinel knows the primary, the replica and the other sentinels."""
        try:
            self.primary.start(min(timeout, 10.0))
            self.replica.options = _replica_options(self.primary)
            self.replica.start(min(timeout, 10.0))
            for sentinel in self.sentinels:
                assert sentinel.config is not None  # each was given its own file
                sentinel.config.write_text(self._sentinel_config())
                sentinel.start(min(timeout, 10.0))
            self.wait_until_healthy(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def _sentinel_config(self) -> str:
        """A sentinel's first configuration: what to watch and how quickly to act. The
        primary's port is the one it listens on now (chosen when it started)."""
        service = self.service
        return (
            f"sentinel monitor {service} 127.0.0.1 {self.primary.port} {self._quorum}\n"
            f"sentinel down-after-milliseconds {service} {self.down_after_ms}\n"
            f"sentinel failover-timeout {service} {self.failover_timeout_ms}\n"
            f"sentinel parallel-syncs {service} 1\n"
        )

    @property
    def _quorum(self) -> int:
        return len(self.sentinels) // 2 + 1

    @staticmethod
    def client(node: LocalServer) -> redis.Redis:
        """A plain connection to one process (a data node or a sentinel)."""
        return redis.Redis(host="127.0.0.1", port=node.port, socket_timeout=5)

    def _running(self, nodes: list[LocalServer]) -> list[LocalServer]:
        return [node for node in nodes if node.process is not None]

    def master_address(self) -> tuple[str, int]:
        """Where the sentinels say the primary of the service is now (the first running
        sentinel that answers)."""
        for sentinel in self._running(self.sentinels):
            address = self._asked(sentinel)
            if address is not None:
                return address
        raise EmbeddedServerError(f"no sentinel names a master for {self.service!r}")

    def _asked(self, sentinel: LocalServer) -> tuple[str, int] | None:
        """Where ``sentinel`` says the primary is; None if it does not answer or know."""
        try:
            with self.client(sentinel) as conn:
                address = conn.sentinel_get_master_addr_by_name(self.service)
        except redis.RedisError:
            return None
        if address is None:
            return None
        host, port = address
        return host.decode() if isinstance(host, bytes) else str(host), int(port)

    def master(self) -> LocalServer:
        """The data node a sentinel names as the primary now."""
        _, port = self.master_address()
        return next(node for node in self.nodes if node.port == port)

    def wait_for_master(
        self, other_than: LocalServer | None = None, timeout: float = START_TIMEOUT
    ) -> LocalServer:
        """Waits until every running sentinel names the same running data node, other
        than ``other_than``, as the primary, and that node says it is a master; returns it."""
        deadline = time.monotonic() + timeout
        while True:
            named = self._agreed_master()
            if named is not None and named is not other_than:
                with self.client(named) as conn:
                    if conn.execute_command("ROLE")[0] == b"master":
                        return named
            if time.monotonic() > deadline:
                raise EmbeddedServerError(
                    f"the sentinels named no new master within {timeout} s "
                    f"(they name port {named.port if named else None})"
                )
            time.sleep(0.05)

    def _agreed_master(self) -> LocalServer | None:
        """The running data node every running sentinel names as the primary, if they
        agree on one."""
        addresses = {self._asked(sentinel) for sentinel in self._running(self.sentinels)}
        named = addresses.pop() if len(addresses) == 1 else None
        if named is None:  # they disagree, or one does not answer
            return None
        return next((node for node in self._running(self.nodes) if node.port == named[1]), None)

    def wait_until_healthy(self, timeout: float = START_TIMEOUT) -> None:
        """Waits until the running sentinels agree on a running primary that they see up,
        each knows the other running sentinels and every running replica, and every
        running replica is in sync with the primary (so a failover can happen, and a
        write can be confirmed by ``WAIT``)."""
        deadline = time.monotonic() + timeout
        while problem := self._problem_or_error():
            if time.monotonic() > deadline:
                raise EmbeddedServerError(
                    f"the set-up was not healthy within {timeout} s: {problem}"
                )
            time.sleep(0.05)

    def _problem_or_error(self) -> str:
        try:
            return self._problem()
        except redis.RedisError as exc:  # a process not answering yet, or any more
            return f"{type(exc).__name__}: {exc}"

    def _problem(self) -> str:
        """What keeps the set-up from being healthy, or '' if nothing does."""
        master = self._agreed_master()
        if master is None:
            return "the sentinels do not name one running master"
        replicas = [node for node in self._running(self.nodes) if node is not master]
        sentinels = self._running(self.sentinels)
        for sentinel in sentinels:
            with self.client(sentinel) as conn:
                state = conn.sentinel_master(self.service)
                known = conn.sentinel_slaves(self.service)
            if not state["is_master"] or state["is_sdown"] or state["is_odown"]:
                return f"sentinel on port {sentinel.port} sees the master down"
            if state["num-other-sentinels"] < len(sentinels) - 1:
                return (
                    f"sentinel on port {sentinel.port} knows {state['num-other-sentinels']} others"
                )
            seen = {int(r["port"]) for r in known if not r["is_sdown"] and not r["is_odown"]}
            if not {replica.port for replica in replicas} <= seen:
                return f"sentinel on port {sentinel.port} sees replicas {sorted(seen)}"
        for replica in replicas:
            with self.client(replica) as conn:
                info = conn.info("replication")
            if info["role"] != "slave" or int(info["master_port"]) != master.port:
                return f"port {replica.port} is no replica of the master on port {master.port}"
            if info["master_link_status"] != "up":
                link = info["master_link_status"]
                return f"port {replica.port}: its link to the master is {link}"
        return ""

    def failover(self, timeout: float = START_TIMEOUT) -> LocalServer:
        """Promotes the replica now (``SENTINEL FAILOVER``, which needs no agreement) and
        waits until the sentinels name it and it is a master; returns it."""
        old = self.master()
        sentinel = self._running(self.sentinels)[0]
        with self.client(sentinel) as conn:
            conn.sentinel_failover(self.service)
        return self.wait_for_master(other_than=old, timeout=timeout)

    def kill(self, node: LocalServer) -> None:
        """Kills one process (SIGKILL to the process this object started): a crash. A
        killed primary's replica is promoted once the sentinels see it down
        (:meth:`wait_for_master` waits for that)."""
        if node.process is not None:
            node.process.kill()
            node.process.wait(timeout=10)
            node.process = None

    def restart(self, node: LocalServer, timeout: float = START_TIMEOUT) -> None:
        """Starts a killed process again. A data node comes back as a replica of the
        primary the sentinels name, if that is another node; then this waits until the
        set-up is healthy."""
        if node in self.nodes:
            master = self.master()
            node.options = list(DATA_OPTIONS) if master is node else _replica_options(master)
        node.start(min(timeout, 10.0))
        self.wait_until_healthy(timeout)

    def close(self) -> None:
        """Stops every process this object started and removes their folders."""
        for node in [*self.sentinels, *self.nodes]:
            node.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _replica_options(master: LocalServer) -> list[str]:
    """A data node's arguments to start as a replica of ``master``."""
    return [*DATA_OPTIONS, "--replicaof", "127.0.0.1", str(master.port)]
