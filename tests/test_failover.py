"""High availability on a Redis / Valkey Cluster: calls are routed by their own hash slot,
so that no failover stops a client, the master of slot 0's included (redis-py's cluster
client asks that node where an FCALL goes); a stale map is mended within the call; and
``replicas=N`` is acknowledged only when the master that ran the write says N replicas
have it. These tests kill and promote real nodes of clusters of their own, and judge by
what was acknowledged and what ran, never by timing."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Iterator

import pytest

from fairque import (
    AsyncFairQueue,
    AsyncShardedQueue,
    FairQueue,
    NotReplicated,
    ShardedQueue,
    Task,
)
from fairque.engine.blocking_routes import ClusterRoute
from fairque.engine.cluster import SlotMap, Topology, slot_of
from fairque.engine.shards import shard_index
from fairque.servers.embedded import LocalServer
from fairque.servers.local_cluster import LocalCluster
from tests.conftest import ENGINES, REDIS, wait_for
from tests.drill import TENANTS, Drill

pytestmark = pytest.mark.long

SLOT_ZERO_KEY = "{06S}"  # a key of hash slot 0


def test_a_map_is_read_from_cluster_slots() -> None:
    reply = [
        [0, 5460, [b"10.0.0.1", 7000, b"id1"], [b"10.0.0.4", 7003, b"id4"]],
        [10923, 16383, [b"", 7002, b"id3"]],  # no host: the host of the node asked
        [5461, 10922, [b"::1", 7001, b"id2"]],
    ]
    found = SlotMap.parse(reply, "10.0.0.9:7009")
    assert found.primary(0) == "10.0.0.1:7000"
    assert found.primary(5461) == "[::1]:7001"
    assert found.primary(16383) == "10.0.0.9:7002"
    assert found.primaries() == ["10.0.0.1:7000", "[::1]:7001", "10.0.0.9:7002"]
    assert found.nodes == ("10.0.0.1:7000", "10.0.0.9:7002", "[::1]:7001", "10.0.0.4:7003")
    moved = found.moved(100, "10.0.0.4:7003")  # one slot moved: its neighbours stay
    assert [moved.primary(slot) for slot in (99, 100, 101)] == [
        "10.0.0.1:7000", "10.0.0.4:7003", "10.0.0.1:7000",
    ]  # fmt: skip
    assert SlotMap.parse([], "h:1").primary(0) is None  # a cluster with no slots served


def test_the_node_that_failed_is_asked_last() -> None:
    topology = Topology(("a:1", "b:2", "c:3"))
    for _ in range(20):
        order = topology.ask_order("b:2")
        assert sorted(order) == ["a:1", "b:2", "c:3"]
        assert order[-1] == "b:2"
    topology.learn([[0, 16383, [b"d", 4, b"id"]]], "a:1")
    assert topology.primary_for("anything") == "d:4"
    assert set(topology.ask_order(None)) == {"a:1", "b:2", "c:3", "d:4"}
    assert slot_of(SLOT_ZERO_KEY) == 0
    assert slot_of("fq:{x}:ring") == slot_of("x")


@pytest.fixture(scope="module", params=ENGINES)
def own_cluster(request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    """A cluster of this module's own (its tests kill nodes), healthy before each test."""
    binary = REDIS if request.param == "redis" else None
    with LocalCluster(binary) as started:
        yield started


@pytest.fixture
def cluster(own_cluster: LocalCluster) -> Iterator[LocalCluster]:
    yield own_cluster
    for node in own_cluster.nodes:  # what a test killed comes back, as a replica
        if node.process is None:
            node.start()
    own_cluster.wait_until_healthy()


def namespace_on(cluster: LocalCluster, master: LocalServer, other: bool = False) -> str:
    """A new namespace whose slot ``master`` serves (or, with ``other``, does not)."""
    while True:
        name = f"ha-{uuid.uuid4().hex[:8]}"
        if (cluster.master_of(f"fq:{{{name}}}:ring") is master) != other:
            return name


def agreed(cluster: LocalCluster, key: str, master: LocalServer) -> bool:
    """True once every running node names ``master`` as the primary of ``key``'s slot."""
    slot = slot_of(key)
    for node in cluster.nodes:
        if node.process is None:
            continue
        with cluster.client(node) as conn:
            ranges = conn.execute_command("CLUSTER SLOTS")
        ports = [int(primary[1]) for first, last, primary, *_ in ranges if first <= slot <= last]
        if ports != [master.port]:
            return False
    return True


def fail_over(cluster: LocalCluster, key: str) -> tuple[LocalServer, LocalServer]:
    """Kills the master of ``key`` and promotes its replica at once (TAKEOVER); returns
    both once every node knows the new master."""
    master = cluster.master_of(key)
    replica = cluster.replica_of(master)
    cluster.kill(master)
    cluster.promote(replica)
    wait_for(lambda: agreed(cluster, key, replica), timeout=30, interval=0.05)
    return master, replica


def test_losing_the_master_of_slot_zero_stops_no_other_namespace(cluster: LocalCluster) -> None:
    slot_zero = cluster.master_of(SLOT_ZERO_KEY)
    elsewhere = namespace_on(cluster, slot_zero, other=True)
    with FairQueue(cluster.url, elsewhere) as queue:
        queue.push(Task(user_id="u", task_id="before"))
        cluster.kill(slot_zero)
        # Not a single call waits for the failover: this namespace's master is alive.
        for n in range(20):
            queue.push(Task(user_id="u", task_id=f"after-{n}"))
        assert len(queue.pop(count=30)) == 21


def test_a_stale_map_is_mended_within_the_call(cluster: LocalCluster) -> None:
    name = namespace_on(cluster, cluster.master_of(SLOT_ZERO_KEY))
    key = f"fq:{{{name}}}:ring"
    with FairQueue(cluster.url, name) as queue:
        queue.push(Task(user_id="u", task_id="one"))  # the map is known now
        fail_over(cluster, key)
        # The map names the dead master: the call's connection error has the map asked
        # again, and the same call goes to the promoted replica.
        queue.push(Task(user_id="u", task_id="two"))
        assert {leased.task_id for leased in queue.pop(count=5)} == {"one", "two"}


async def test_a_stale_map_is_mended_within_an_async_call(cluster: LocalCluster) -> None:
    name = namespace_on(cluster, cluster.master_of(SLOT_ZERO_KEY), other=True)
    key = f"fq:{{{name}}}:ring"
    async with AsyncFairQueue(cluster.url, name) as queue:
        await queue.push(Task(user_id="u", task_id="one"))
        await asyncio.to_thread(fail_over, cluster, key)
        await queue.push(Task(user_id="u", task_id="two"))
        assert {leased.task_id for leased in await queue.pop(count=5)} == {"one", "two"}


def hand_over(cluster: LocalCluster, key: str, replica: LocalServer) -> None:
    """A graceful failover to ``replica`` (``CLUSTER FAILOVER``), until every node names
    it the master of ``key``'s slot; asked again every 15 s while it is a replica (a
    manual failover gives up after 5 s if the replica did not catch up, as on a loaded
    machine), 2 minutes at most."""
    deadline = time.monotonic() + 120
    asked = -math.inf
    while not agreed(cluster, key, replica):
        if time.monotonic() > deadline:
            pytest.fail(f"the replica on port {replica.port} did not take over in 2 minutes")
        with cluster.client(replica) as conn:
            if time.monotonic() - asked > 15 and conn.execute_command("ROLE")[0] != b"master":
                conn.execute_command("CLUSTER", "FAILOVER")
                asked = time.monotonic()
        time.sleep(0.05)


@pytest.mark.timeout(240)
def test_a_demoted_master_sends_the_call_to_the_new_one(cluster: LocalCluster) -> None:
    name = namespace_on(cluster, cluster.master_of(SLOT_ZERO_KEY))
    key = f"fq:{{{name}}}:ring"
    with FairQueue(cluster.url, name) as queue:
        queue.push(Task(user_id="u", task_id="one"))
        master = cluster.master_of(key)
        replica = cluster.replica_of(master)
        hand_over(cluster, key, replica)  # a graceful failover: the old master lives
        # The old master answers MOVED (or READONLY): the call follows to the new one.
        queue.push(Task(user_id="u", task_id="two"), replicas=1, replica_timeout=5)
        assert {leased.task_id for leased in queue.pop(count=5)} == {"one", "two"}


def test_a_replicated_push_is_never_acknowledged_by_a_master_without_replicas(
    cluster: LocalCluster,
) -> None:
    name = namespace_on(cluster, cluster.master_of(SLOT_ZERO_KEY))
    key = f"fq:{{{name}}}:ring"
    with FairQueue(cluster.url, name) as queue:
        queue.push(Task(user_id="u", task_id="one"), replicas=1, replica_timeout=5)
        # The promoted replica has no replica of its own until the old master returns.
        fail_over(cluster, key)
        with pytest.raises(NotReplicated) as refused:
            queue.push(Task(user_id="u", task_id="two"), replicas=1, replica_timeout=0.2)
        assert (refused.value.acknowledged, refused.value.wanted) == (0, 1)
        assert refused.value.task_ids == ["two"]  # made, and said to be unconfirmed
        assert {leased.task_id for leased in queue.pop(count=5)} == {"one", "two"}


async def test_an_async_replicated_push_waits_on_the_master_that_ran_it(
    cluster: LocalCluster,
) -> None:
    name = namespace_on(cluster, cluster.master_of(SLOT_ZERO_KEY), other=True)
    master = cluster.master_of(f"fq:{{{name}}}:ring")
    async with AsyncFairQueue(cluster.url, name) as queue:
        await queue.push(Task(user_id="u", task_id="one"), replicas=1, replica_timeout=5)
        cluster.kill(cluster.replica_of(master))  # every other master keeps its replica
        with pytest.raises(NotReplicated) as refused:
            await queue.push(Task(user_id="u", task_id="two"), replicas=1, replica_timeout=0.2)
        assert refused.value.acknowledged == 0


# The failover drill: a sharded queue over every master, a worker, and a pusher that waits
# for one replica; each master is killed in turn, slot 0's first.


def spread_namespace(cluster: LocalCluster, shards: int) -> str:
    """A namespace whose shards live on every master."""
    while True:
        name = f"drill-{uuid.uuid4().hex[:6]}"
        served = {cluster.master_of(f"fq:{{{name}:{shard}}}:ring").port for shard in range(shards)}
        if len(served) == cluster.masters:
            return name


@pytest.mark.timeout(300)
async def test_each_master_killed_in_turn_loses_no_acknowledged_push(
    cluster: LocalCluster,
) -> None:
    shards = 6
    name = spread_namespace(cluster, shards)
    drill = Drill(cluster.url, name, shards)
    drill.start()
    try:
        await drill.until(lambda: len(drill.pusher.confirmed) >= 50)
        slot_zero = cluster.master_of(SLOT_ZERO_KEY)
        masters = sorted(
            (
                node
                for node in cluster.nodes
                if node.process is not None and is_master(cluster, node)
            ),
            key=lambda node: node is not slot_zero,
        )
        for master in masters:
            moved = on_master(cluster, name, shards, master)  # the tenants it serves
            known = len(drill.pusher.tenants)
            cluster.kill(master)
            # Work resumes by itself: the replica is promoted after the node timeout
            # (2 s), and the pusher and the worker find it. Its pushes are not confirmed
            # until it has a replica of its own.
            await drill.resumed(known, moved)
            # Back as a replica once its replica took over: restarted before, a master
            # kept in memory only would come back empty and empty its replica too.
            await asyncio.to_thread(cluster.wait_until_healthy)
            await asyncio.to_thread(cluster.restart, master)
            await drill.confirmed_again()
        await drill.finish()
    finally:
        await drill.close()


def test_a_sharded_pop_goes_on_without_a_shard_whose_master_is_away(cluster: LocalCluster) -> None:
    name = spread_namespace(cluster, 6)
    with ShardedQueue(cluster.url, name, shards=6) as queue:
        for n in range(20):
            queue.push(Task(user_id=f"t{n}", task_id=f"task-{n}"))
        master = cluster.master_of(f"fq:{{{name}:0}}:ring")
        away = on_master(cluster, name, 6, master)
        cluster.kill(master)
        # Whichever shard comes first, the pop asks the others, and what it leased from
        # them reaches the caller (a pop that raised would leave it leased to no one).
        leased = {task.user_id for task in queue.pop(count=20)}
        assert {f"t{n}" for n in range(20)} - away <= leased


async def test_an_async_sharded_pop_goes_on_without_a_shard_whose_master_is_away(
    cluster: LocalCluster,
) -> None:
    name = spread_namespace(cluster, 6)
    async with AsyncShardedQueue(cluster.url, name, shards=6) as queue:
        for n in range(20):
            await queue.push(Task(user_id=f"t{n}", task_id=f"task-{n}"))
        master = cluster.master_of(f"fq:{{{name}:1}}:ring")
        away = on_master(cluster, name, 6, master)
        cluster.kill(master)
        leased = {task.user_id for task in await queue.pop(count=20)}
        assert {f"t{n}" for n in range(20)} - away <= leased


def on_master(cluster: LocalCluster, name: str, shards: int, master: LocalServer) -> set[str]:
    """The drill's tenants whose shard ``master`` serves."""
    return {
        f"t{n}"
        for n in range(TENANTS)
        if cluster.master_of(f"fq:{{{name}:{shard_index(f't{n}', shards)}}}:ring") is master
    }


def is_master(cluster: LocalCluster, node: LocalServer) -> bool:
    with cluster.client(node) as conn:
        role: list[bytes] = conn.execute_command("ROLE")
    return role[0] == b"master"


def test_a_node_client_keeps_no_cluster_hooks(own_cluster: LocalCluster) -> None:
    """A node's client takes only its connection options from the cluster client: not the
    cluster's response callbacks or retries (a failed call is routed again instead)."""
    with FairQueue(own_cluster.url, "hooks") as queue:
        queue.stats()
        route = queue.executor.route
        assert isinstance(route, ClusterRoute)
        assert route.nodes()
        for node in route.nodes():
            retry = node.client.get_retry()
            assert retry is not None
            assert retry.get_retries() == 0
