"""A throwaway Redis / Valkey Cluster on loopback ports, for tests, benchmarks and demos.

Each node is a :class:`fairque.servers.embedded.LocalServer` with ``--cluster-enabled yes``; the
cluster is formed by ``redis-cli --cluster create`` (``valkey-cli`` next to the Valkey
binary), ``masters`` masters with ``replicas`` replicas each. Nodes are stopped by the
processes this object started, nothing else.

>>> with LocalCluster() as cluster:  # doctest: +SKIP
...     FairQueue(cluster.url)
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import redis

from fairque.closing import Closeable
from fairque.errors import EmbeddedServerError
from fairque.servers.embedded import LocalServer, valkey_binary

CREATE_TIMEOUT = 60.0


def cli_for(binary: str | Path) -> str:
    """The ``*-cli`` that ships with ``binary`` (valkey-cli next to valkey-server)."""
    path = Path(binary)
    sibling = path.with_name(path.name.replace("-server", "-cli"))
    if "-server" in path.name and sibling.is_file():
        return str(sibling)
    found = shutil.which("redis-cli")
    if found is None:
        raise EmbeddedServerError(f"no {sibling.name} next to {binary} and no redis-cli")
    return found


class LocalCluster(Closeable):
    """A private cluster on free 127.0.0.1 ports; ``url`` names every node."""

    def __init__(
        self,
        binary: str | Path | None = None,
        *,
        masters: int = 3,
        replicas: int = 1,
        node_timeout_ms: int = 2000,
    ) -> None:
        self.binary = str(binary or valkey_binary())
        self.cli = cli_for(self.binary)
        self.masters = masters
        self.replicas = replicas
        options = [
            "--cluster-enabled", "yes",
            "--cluster-config-file", "nodes.conf",  # in the node's own folder
            "--cluster-node-timeout", str(node_timeout_ms),
            # The shards whose master is up keep serving while another one fails over.
            "--cluster-require-full-coverage", "no",
            # A replica's first sync starts at once, not after the default 5 s wait for
            # more replicas to share one RDB transfer.
            "--repl-diskless-sync-delay", "0",
        ]  # fmt: skip
        self.nodes = [
            LocalServer(self.binary, options=options, cluster_bus=True)
            for _ in range(masters * (1 + replicas))
        ]

    @property
    def url(self) -> str:
        """``redis+cluster://`` naming every node (known once they started)."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)

    def open(self) -> LocalCluster:
        """Starts it: ``with LocalCluster() as server`` (:meth:`close` stops it)."""
        return self.start()

    def start(self, timeout: float = CREATE_TIMEOUT) -> LocalCluster:
        """Starts the nodes, forms the cluster, and waits until every node agrees it is up."""
        try:
            for node in self.nodes:
                node.start(min(timeout, 10.0))
            self._form(timeout)
            self.wait_until_healthy(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def _form(self, timeout: float) -> None:
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        create = [self.cli, "--cluster", "create", *addresses,
                  "--cluster-replicas", str(self.replicas), "--cluster-yes"]  # fmt: skip
        try:
            formed = subprocess.run(create, capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as exc:
            said = (exc.stdout or b"").decode(errors="replace")[-2000:]
            raise EmbeddedServerError(f"--cluster create took over {timeout} s: {said}") from None
        if formed.returncode != 0:
            raise EmbeddedServerError(formed.stdout.decode(errors="replace")[-2000:])

    def client(self, node: LocalServer) -> redis.Redis:
        """A plain connection to one node (for CLUSTER commands)."""
        return redis.Redis(host="127.0.0.1", port=node.port, socket_timeout=5)

    def wait_until_healthy(self, timeout: float = CREATE_TIMEOUT) -> None:
        """Waits until every running node sees all slots served and every node known, and
        every running replica is in sync with its master (so a replica whose master died
        has been promoted, and a write can be confirmed by ``WAIT``)."""
        deadline = time.monotonic() + timeout
        running = [node for node in self.nodes if node.process is not None]
        while problems := [
            problem for node in running if (problem := self._problem(node, len(running)))
        ]:
            if time.monotonic() > deadline:
                raise EmbeddedServerError(
                    f"the cluster was not healthy within {timeout} s: {'; '.join(problems)}"
                )
            time.sleep(0.05)

    def _problem(self, node: LocalServer, known: int) -> str:
        """What keeps ``node`` from being healthy, or '' if nothing does."""
        with self.client(node) as conn:
            info = conn.cluster("INFO")
            replication = conn.info("replication")
        link = replication.get("master_link_status", "up")  # a master has none
        if (
            info["cluster_state"] == "ok"
            and int(info["cluster_known_nodes"]) >= known
            and int(info["cluster_slots_ok"]) == 16384
            and link == "up"
        ):
            return ""
        return (
            f"port {node.port}: state {info['cluster_state']}, knows "
            f"{info['cluster_known_nodes']} of {known} nodes, {info['cluster_slots_ok']} "
            f"slots ok, {replication['role']}, link to its master {link}"
        )

    def master_of(self, key: str) -> LocalServer:
        """The node that serves ``key`` as master, as the first running node sees it."""
        running = [node for node in self.nodes if node.process is not None]
        with self.client(running[0]) as conn:
            slot = int(conn.cluster("KEYSLOT", key))
            ranges = conn.execute_command("CLUSTER SLOTS")
        port = next(int(master[1]) for start, end, master, *_ in ranges if start <= slot <= end)
        return next(node for node in self.nodes if node.port == port)

    def replica_of(self, master: LocalServer) -> LocalServer:
        """A running replica of ``master``."""
        for node in self.nodes:
            if node.process is None or node is master:
                continue
            with self.client(node) as conn:
                role = conn.execute_command("ROLE")
            if role[0] == b"slave" and int(role[2]) == master.port:
                return node
        raise EmbeddedServerError(f"no running replica of the node on port {master.port}")

    def promote(self, replica: LocalServer) -> None:
        """Makes ``replica`` a master now (its master may be down): CLUSTER FAILOVER TAKEOVER."""
        with self.client(replica) as conn:
            conn.execute_command("CLUSTER", "FAILOVER", "TAKEOVER")
        deadline = time.monotonic() + CREATE_TIMEOUT
        while True:
            with self.client(replica) as conn:
                if conn.execute_command("ROLE")[0] == b"master":
                    break
            if time.monotonic() > deadline:
                raise EmbeddedServerError(f"node on port {replica.port} did not become master")
            time.sleep(0.05)

    def kill(self, node: LocalServer) -> None:
        """Kills one node (SIGKILL to the process this object started): a crash. A killed
        master's replica takes over by :meth:`promote`, or by itself after the node
        timeout (:meth:`wait_until_healthy` waits for that)."""
        if node.process is not None:
            node.process.kill()
            node.process.wait(timeout=10)
            node.process = None

    def restart(self, node: LocalServer, timeout: float = CREATE_TIMEOUT) -> None:
        """Starts a stopped node again; it rejoins (a replica, if it was failed over)."""
        node.start()
        self.wait_until_healthy(timeout)

    def close(self) -> None:
        """Stops every node this object started and removes their folders."""
        for node in self.nodes:
            node.close()
