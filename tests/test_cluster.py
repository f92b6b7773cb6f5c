"""Redis / Valkey Cluster: URLs, scripts on every node, WAIT, and a failover under load.

The engine, worker and dependency suites run on the clusters too (their modules are
marked ``cluster``); this module covers what only a cluster has.
"""

from __future__ import annotations

import uuid

import pytest
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
from redis.cluster import RedisCluster

from fairque import AsyncFairQueue, FairQueue, InvalidInput, NotReplicated, Task
from fairque.engine import scripts
from fairque.engine.connect import cluster_nodes, is_cluster_url, sync_client
from fairque.errors import EmbeddedServerError
from fairque.servers.embedded import LocalServer
from fairque.servers.local_cluster import LocalCluster, cli_for
from tests.conftest import wait_for


def test_cluster_urls_name_startup_nodes() -> None:
    url = "redis+cluster://user:secret@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002/0?ssl_cert_reqs=none"
    assert is_cluster_url(url)
    assert not is_cluster_url("redis://10.0.0.1:7000")
    first, others = cluster_nodes(url)
    assert first == "redis://user:secret@10.0.0.1:7000/0?ssl_cert_reqs=none"
    assert others == [("10.0.0.2", 7001), ("::1", 7002)]
    assert cluster_nodes("rediss+cluster://h:1")[0] == "rediss://h:1"
    assert cluster_nodes("redis+cluster://[::1]:7000")[0] == "redis://[::1]:7000"


@pytest.mark.parametrize("node", ["nohost", "h:port", "h:0", ":7000", "h:99999"])
def test_bad_cluster_nodes_are_named(node: str) -> None:
    with pytest.raises(InvalidInput, match="cluster node") as caught:
        cluster_nodes(f"redis+cluster://a:7000,{node}")
    assert caught.value.field == "url"


def test_the_cli_next_to_the_server_or_on_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli_for(LocalCluster().binary).endswith("valkey-cli")
    monkeypatch.setenv("PATH", "/nowhere")
    with pytest.raises(EmbeddedServerError, match="no redis-cli"):
        cli_for("/nowhere/redis-server")


def test_a_cluster_that_cannot_start_leaves_nothing_running() -> None:
    cluster = LocalCluster("/bin/false")
    with pytest.raises(EmbeddedServerError):
        cluster.start(timeout=0.5)
    assert all(node.process is None for node in cluster.nodes)
    assert not any(node.folder.exists() for node in cluster.nodes)


def test_a_cluster_url_gives_cluster_clients(cluster: LocalCluster) -> None:
    with FairQueue(cluster.url, "cluster-client") as queue:
        assert isinstance(queue.redis, RedisCluster)
        assert len(queue.redis.get_primaries()) == 3  # type: ignore[no-untyped-call]
    assert isinstance(AsyncFairQueue(cluster.url).redis, AsyncRedisCluster)


def spread_namespaces(cluster: LocalCluster) -> list[str]:
    """One fresh namespace on each master."""
    chosen: dict[int, str] = {}
    while len(chosen) < cluster.masters:
        namespace = f"t-{uuid.uuid4().hex[:12]}"
        chosen.setdefault(cluster.master_of(f"fq:{{{namespace}}}:ring").port, namespace)
    return list(chosen.values())


def test_an_unhealthy_cluster_says_what_is_wrong() -> None:
    with LocalCluster() as own:
        master = own.master_of("any")
        replica = own.replica_of(master)
        own.kill(master)  # nobody has noticed yet: the replica's link is down
        with pytest.raises(EmbeddedServerError, match=r"not healthy within 0\.2 s") as caught:
            own.wait_until_healthy(timeout=0.2)
    assert f"port {replica.port}: " in str(caught.value)
    assert "link to its master down" in str(caught.value)


def test_scripts_load_on_every_node(cluster: LocalCluster) -> None:
    client = sync_client(cluster.url)
    client.function_flush()  # on every master: no function anywhere
    library = scripts.load("queue/push").function
    for node in cluster.nodes:
        with cluster.client(node) as conn:
            assert conn.function_list(library) == []
    for namespace in spread_namespaces(cluster):
        queue = FairQueue(namespace=namespace, client=client)
        task_id = queue.push(Task(user_id="u", payload=namespace))
        [leased] = queue.pop()
        assert (leased.task_id, leased.payload) == (task_id, namespace)
        queue.finish(leased)
        assert queue.stats().counters["finished"] == 1

    def loaded(node: LocalServer) -> bool:
        with cluster.client(node) as conn:
            return len(conn.function_list(library)) == 1

    # Loaded on every master, and replicated (asynchronously: polled).
    wait_for(lambda: all(loaded(node) for node in cluster.nodes), timeout=10)
    client.close()


def test_a_replicated_push_waits_for_a_replica(cluster: LocalCluster, namespace: str) -> None:
    with FairQueue(cluster.url, namespace) as queue:
        [task_id] = queue.push_many([Task(user_id="u")], replicas=1, replica_timeout=5)
        assert queue.get(task_id) is not None
        # Each master has one replica: asking for two times out, but the push is made.
        with pytest.raises(NotReplicated) as caught:
            queue.push(Task(user_id="u", task_id="second"), replicas=2, replica_timeout=0.5)
        assert (caught.value.task_ids, caught.value.acknowledged) == (["second"], 1)
        assert queue.get("second") is not None


async def test_an_async_replicated_push_after_a_function_flush(
    cluster: LocalCluster, namespace: str
) -> None:
    async with AsyncFairQueue(cluster.url, namespace) as queue:
        await queue.redis.initialize()
        await queue.redis.function_flush()
        task_id = await queue.push(Task(user_id="u"), replicas=1, replica_timeout=5)
        assert (await queue.get(task_id)) is not None


def test_replicated_pushes_on_one_server(server: LocalServer, namespace: str) -> None:
    with FairQueue(server.url, namespace) as queue:
        queue.redis.function_flush()
        with pytest.raises(NotReplicated) as caught:
            queue.push(Task(user_id="u", task_id="lonely"), replicas=1, replica_timeout=0.01)
        assert caught.value.wanted == 1
        assert queue.get("lonely") is not None
        assert queue.push(Task(user_id="u"), replicas=0)  # no WAIT at all


@pytest.mark.parametrize(
    ("replicas", "timeout", "field"),
    [(-1, 1.0, "replicas"), (101, 1.0, "replicas"), (1, 0.0, "replica_timeout")],
)
def test_bad_replica_options_change_nothing(
    queue: FairQueue, replicas: int, timeout: float, field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        queue.push(Task(user_id="u"), replicas=replicas, replica_timeout=timeout)
    assert caught.value.field == field
    assert sum(queue.stats().states.values()) == 0


def test_script_errors_keep_their_meaning_on_a_cluster(
    cluster: LocalCluster, namespace: str
) -> None:
    with FairQueue(cluster.url, namespace) as queue:
        queue.push(Task(user_id="u", task_id="same"), replicas=1, replica_timeout=5)
        with pytest.raises(Exception, match="already exists"):
            queue.push(Task(user_id="u", task_id="same"), replicas=1, replica_timeout=5)
