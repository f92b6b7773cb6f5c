"""``finish_and_pop`` (queue/finish_pop.lua) against ``finish_many`` then ``pop``: the same
scenario on two namespaces, one driven by the two calls, the other by the combined one,
must give equal replies and leave equal records, stats, shares and rings (but times)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from fairque import FairQueue, InvalidInput, LeasedTask, Priority, QueueSettings, Task
from fairque.engine.calls import pack
from fairque.queue.models import QueueStats, TaskInfo
from fairque.queue.plans import QueuePlans
from tests.conftest import Server, namespace_keys

pytestmark = pytest.mark.cluster

NAMES = ["render", "mail"]
TENANTS = ["alice", "bob", "carol", "dave"]
# A time, a lease token (a tick of the server clock) or what is made of them: two
# namespaces run at different moments, so these differ.
TIMES = ("created_at", "execute_after", "start_time", "prev_start_time", "leased_at",
         "lease_deadline", "lease_token", "finished_at", "progress_at")  # fmt: skip
# Each round: the pop's count and what else it is given (a round with named tenants too).
ROUNDS: list[tuple[int, dict[str, Any]]] = [
    (3, {}),
    (5, {}),
    (1, {}),
    (4, {"assigned_users": ["dave"], "steal_targets": ["alice", "bob"]}),
    (10, {}),
    (2, {}),
]


def scenario() -> list[Task]:
    """Tenants with a weight, a concurrency limit and a rate limit (3 starts an hour: it
    holds for the whole test), priorities and a critical task, a task name with a
    concurrency limit, results kept and a dependency."""
    tasks = [
        Task(user_id="alice", name="mail", task_id=f"a{i}", priority=p, payload=i)
        for i, p in enumerate([Priority(1), Priority(5), Priority(3), Priority(5), Priority(2)])
    ]
    tasks.append(Task(user_id="alice", name="render", task_id="a-critical",
                      priority=Priority.CRITICAL))  # fmt: skip
    tasks += [Task(user_id="bob", name="render", task_id=f"b{i}", payload=i) for i in range(4)]
    tasks += [Task(user_id="carol", name="mail", task_id=f"c{i}", payload=i) for i in range(5)]
    tasks += [
        Task(user_id="dave", name="render", task_id=f"d{i}", keep_result=True, payload=i)
        for i in range(3)
    ]
    tasks.append(Task(user_id="dave", name="mail", task_id="d-after", depends_on=("d0",)))
    return tasks


def prepared(server: Server, namespace: str) -> FairQueue:
    queue = FairQueue(server.url, namespace)
    queue.set_tenant("alice", weight=2)
    queue.set_tenant("bob", concurrency=1)
    queue.set_tenant("carol", rate=3, period=3600)
    queue.set_limits("render", concurrency=2)
    queue.push_many(scenario())
    return queue


@pytest.fixture
def queues(server: Server, namespace: str) -> Iterator[tuple[FairQueue, FairQueue]]:
    """The scenario on two namespaces: one for the two calls, one for the combined one."""
    separate, combined = prepared(server, namespace + "-a"), prepared(server, namespace + "-b")
    yield separate, combined
    separate.close()
    combined.close()


def seen(tasks: list[LeasedTask]) -> list[tuple[Any, ...]]:
    return [
        (t.task_id, t.user_id, t.priority, t.name, t.payload, t.attempts, t.timeout,
         t.max_retries, t.headers)
        for t in tasks
    ]  # fmt: skip


def record(queue: FairQueue, task_id: str) -> TaskInfo | None:
    info = queue.get(task_id)
    blank: dict[str, Any] = dict.fromkeys(TIMES)
    return None if info is None else dataclasses.replace(info, **blank)


def figures(stats: QueueStats) -> tuple[Any, ...]:
    """What stats() says, but times (the fairness window's by minute: the two namespaces
    may fall on either side of a minute's end)."""
    fairness = stats.fairness
    assert fairness is not None
    served = sorted(
        (one.tenant, one.starts, dataclasses.replace(one.shares, window_opens_at=None))
        for one in fairness.tenants
    )
    history = [sum(getattr(minute, name) for minute in fairness.history)
               for name in ("starts", "pushed", "finished", "failed")]  # fmt: skip
    return (stats.states, stats.counters, stats.tenants, stats.all_tenants,
            stats.tenants_with_ready, fairness.starts, served, history)  # fmt: skip


def rings(queue: FairQueue) -> dict[str, list[bytes]]:
    """Each lane's ring, in order (its scores are ticks of the clock)."""
    client: Any = queue.redis
    return {name: client.zrange(queue.namespace.lane_key(name, "ring"), 0, -1) for name in NAMES}


def standing(queue: FairQueue) -> tuple[Any, ...]:
    """Where the tenants and the task names stand: their running counts, ready tasks,
    whether a pop may serve them."""
    shares = [dataclasses.replace(queue.tenant(t), window_opens_at=None) for t in TENANTS]
    limits = [dataclasses.replace(queue.limits(n), window_opens_at=None) for n in NAMES]
    return shares, limits, rings(queue)


def acknowledged(held: list[LeasedTask], round_no: int) -> list[LeasedTask]:
    """What a round finishes: the older half of what is held."""
    return held[: (len(held) + 1) // 2] if round_no % 3 else held[:]


def results_of(tasks: list[LeasedTask]) -> list[Any]:
    return [{"by": task.task_id} if task.user_id == "dave" else None for task in tasks]


def test_finish_and_pop_is_finish_then_pop(queues: tuple[FairQueue, FairQueue]) -> None:
    separate, combined = queues
    held_a: list[LeasedTask] = []
    held_b: list[LeasedTask] = []
    first_done: tuple[LeasedTask, LeasedTask] | None = None
    lost_any = found_nothing = False
    for round_no in range(40):
        count, named = ROUNDS[round_no % len(ROUNDS)]
        batch_a, batch_b = acknowledged(held_a, round_no), acknowledged(held_b, round_no)
        assert [t.task_id for t in batch_a] == [t.task_id for t in batch_b]
        if round_no == 2:  # a lease of another token, and a task finished already: both lost
            assert first_done is not None
            stale_a, stale_b = (
                dataclasses.replace(held[-1], lease_token="1") for held in (held_a, held_b)
            )
            batch_a, batch_b = (
                [*batch_a, stale_a, first_done[0]],
                [*batch_b, stale_b, first_done[1]],
            )
        results = results_of(batch_a)

        lost_a = separate.finish_many(batch_a, results)
        leased_a = separate.pop(count, worker_id="w", names=NAMES, **named)
        lost_b, leased_b = combined.finish_and_pop(
            batch_b, results, count=count, worker_id="w", names=NAMES, **named
        )

        assert lost_b == lost_a
        assert seen(leased_b) == seen(leased_a)
        assert standing(combined) == standing(separate)
        lost_any = lost_any or bool(lost_a)
        if first_done is None and batch_a:
            first_done = batch_a[0], batch_b[0]
        held_a = [t for t in held_a if t not in batch_a] + leased_a
        held_b = [t for t in held_b if t not in batch_b] + leased_b
        if not leased_a and not held_a:
            found_nothing = True
            break
    assert lost_any
    assert found_nothing
    assert separate.stats().counters["finished"] == 17  # carol's rate held two of hers back
    assert figures(combined.stats()) == figures(separate.stats())
    for task_id in (task.task_id or "" for task in scenario()):
        assert record(combined, task_id) == record(separate, task_id)
    kept = combined.get("d1")
    assert kept is not None
    assert kept.result == {"by": "d1"}
    # Nothing to finish, nothing to pop: a call that changes nothing but the housekeeping.
    assert combined.finish_and_pop([], count=3, worker_id="w", names=NAMES) == ([], [])


def test_the_pop_sees_the_slots_the_finishes_free(server: Server, namespace: str) -> None:
    """Bob may run one task at a time and `render` two: the finish of his running task
    lets the same call start his next one."""
    with FairQueue(server.url, namespace) as queue:
        queue.set_tenant("bob", concurrency=1)
        queue.set_limits("render", concurrency=1)
        queue.push_many([Task(user_id="bob", name="render", task_id=f"b{i}") for i in range(3)])
        first = queue.pop(3, worker_id="w", names=["render"])
        assert [t.task_id for t in first] == ["b0"]
        assert queue.pop(3, worker_id="w", names=["render"]) == []
        lost, leased = queue.finish_and_pop(first, count=3, worker_id="w", names=["render"])
        assert lost == []
        assert [t.task_id for t in leased] == ["b1"]


def test_bad_input_is_refused_with_nothing_changed(server: Server, namespace: str) -> None:
    with FairQueue(server.url, namespace, settings=QueueSettings(max_payload_bytes=64)) as queue:
        queue.push_many([Task(user_id="u", name="n", task_id=f"t{i}") for i in range(3)])
        leased = queue.pop(2, worker_id="w")
        client: Any = queue.redis
        before = namespace_keys(client, namespace)

        def refused(error: type[Exception], match: str, call: Callable[[], object]) -> None:
            with pytest.raises(error, match=match):
                call()
            assert namespace_keys(client, namespace) == before

        pop: dict[str, Any] = {"worker_id": "w", "names": ["n"]}
        refused(InvalidInput, "count", lambda: queue.finish_and_pop(leased, count=0, **pop))
        refused(InvalidInput, "one result per task",
                lambda: queue.finish_and_pop(leased, [1], count=1, **pop))  # fmt: skip
        refused(InvalidInput, "worker_id",
                lambda: queue.finish_and_pop(leased, count=1, worker_id="a\nb"))  # fmt: skip
        # Over the namespace's own limit: the script refuses it, before any write.
        too_big = ["x" * 100, None]
        refused(InvalidInput, "result",
                lambda: queue.finish_and_pop(leased, too_big, count=1, **pop))  # fmt: skip

        def raw(*args: Any) -> Callable[[], object]:
            call = queue.namespace.call("queue/finish_pop", args, lambda reply: reply)
            return lambda: queue.execute(call)

        one = leased[0]
        popping = ("w", 1, "", 0, 0)
        rows = pack([one.task_id, one.lease_token, 0])
        refused(InvalidInput, "do not match their count", raw(2, rows, 0, *popping))
        refused(InvalidInput, "row 1 names result 1 of 0",
                raw(1, pack([one.task_id, one.lease_token, 1]), 0, *popping))  # fmt: skip
        refused(InvalidInput, "does not match the arguments", raw(1, rows, 3, *popping))
        refused(InvalidInput, "does not match the arguments", raw(1, rows, "x", *popping))
        # And queue/finish holds its slots to the results it is sent as well.
        finish = queue.namespace.call(
            "queue/finish", (1, pack([one.task_id, one.lease_token, 2]), b"\x01"), list
        )
        refused(InvalidInput, "row 1 names result 2 of 1", lambda: queue.execute(finish))
        assert queue.finish_and_pop(leased, count=1, **pop)[0] == []


def test_a_sharded_queue_finishes_and_pops_in_separate_calls() -> None:
    """Its tasks' shards and its pop's are not one cluster slot: the plan refuses before
    anything is sent (the sharded clients have no such method; a worker of one sends
    its acknowledgements on their own)."""
    plan = QueuePlans(["q:0", "q:1"]).finish_and_pop(
        [], None, count=1, assigned_users=None, steal_targets=None, worker_id="w",
        lease_seconds=None, names=None,
    )  # fmt: skip
    with pytest.raises(InvalidInput, match="sharded"):
        next(plan)
