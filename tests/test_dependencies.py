"""Dependencies (seed 000, design section 7) on real servers."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest

from fairque import FairQueue, InvalidInput, QueueSettings, Task, TaskNotFound, TaskState
from tests.conftest import namespace_keys, wait_for

pytestmark = pytest.mark.cluster


def job(task_id: str, *depends_on: str, **fields: object) -> Task:
    return Task(user_id="u", task_id=task_id, depends_on=depends_on, payload=task_id, **fields)  # type: ignore[arg-type]


def states(queue: FairQueue, *ids: str) -> dict[str, str]:
    found = {}
    for task_id in ids:
        info = queue.get(task_id)
        assert info is not None
        found[task_id] = info.state.value
    return found


def run_next(queue: FairQueue) -> list[str]:
    """Pops everything ready, finishes it, returns the ids that ran."""
    leased = queue.pop(count=100)
    assert queue.finish_many(leased) == []
    return sorted(task.task_id for task in leased)


def test_linear_pipeline(queue: FairQueue) -> None:
    queue.push_many([job("load", "transform"), job("transform", "extract"), job("extract")])
    assert states(queue, "extract", "transform", "load") == {
        "extract": "queued", "transform": "deferred", "load": "deferred"}  # fmt: skip
    info = queue.get("transform")
    assert info is not None
    assert (info.blocked_by, info.dependents) == (("extract",), ("load",))
    assert run_next(queue) == ["extract"]
    assert run_next(queue) == ["transform"]
    assert run_next(queue) == ["load"]
    assert run_next(queue) == []
    assert queue.stats().states[TaskState.DEFERRED] == 0


def test_fan_out_fan_in(queue: FairQueue) -> None:
    queue.push_many([
        job("prepare"), job("process_a", "prepare"), job("process_b", "prepare"),
        job("combine", "process_a", "process_b"),
    ])  # fmt: skip
    assert queue.stats().states[TaskState.DEFERRED] == 3
    assert run_next(queue) == ["prepare"]
    first, second = queue.pop(count=2)
    queue.finish(first)
    assert states(queue, "combine") == {"combine": "deferred"}
    queue.finish(second)
    assert run_next(queue) == ["combine"]


def test_the_d_e_f_example(queue: FairQueue) -> None:
    queue.push_many([job("A"), job("B"), job("C")])
    queue.push_many([job("D", "A", "B", "C"), job("E", "A", "B"), job("F", "C")])
    by_id = {task.task_id: task for task in queue.pop(count=3)}
    queue.finish(by_id["A"])
    assert states(queue, "D", "E", "F") == {"D": "deferred", "E": "deferred", "F": "deferred"}
    queue.finish(by_id["B"])
    assert states(queue, "D", "E", "F") == {"D": "deferred", "E": "queued", "F": "deferred"}
    d_info = queue.get("D")
    assert d_info is not None
    assert d_info.blocked_by == ("C",)
    queue.finish(by_id["C"])
    assert states(queue, "D", "F") == {"D": "queued", "F": "queued"}
    assert run_next(queue) == ["D", "E", "F"]


def test_finished_dependencies_do_not_block(queue: FairQueue) -> None:
    queue.push(job("parent"))
    run_next(queue)
    queue.push(job("child", "parent"))
    assert states(queue, "child") == {"child": "queued"}


def test_a_child_pushed_while_its_parent_runs_waits_for_it(queue: FairQueue) -> None:
    queue.push(job("parent"))
    (parent,) = queue.pop()
    queue.push(job("child", "parent"))
    assert states(queue, "child") == {"child": "deferred"}
    queue.finish(parent)
    assert run_next(queue) == ["child"]


def test_a_delayed_dependent_is_scheduled_when_released(queue: FairQueue) -> None:
    queue.push_many([job("first"), job("later", "first", delay=timedelta(hours=1))])
    run_next(queue)
    assert states(queue, "later") == {"later": "scheduled"}


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        ([("a", "ghost")], "no task with id ghost"),
        ([("a", "b"), ("b", "c"), ("c", "a")], "dependency cycle: a -> b -> c -> a"),
        ([("a", "b"), ("b", "a"), ("c",)], "dependency cycle: a -> b -> a"),
    ],
)
def test_unknown_ids_and_cycles_are_refused(
    queue: FairQueue, namespace: str, batch: list[tuple[str, ...]], message: str
) -> None:
    queue.push(job("existing"))
    before = namespace_keys(queue.redis, namespace)
    with pytest.raises(InvalidInput, match=message) as raised:
        queue.push_many([job(*names) for names in batch])
    assert raised.value.field == "depends_on"
    assert namespace_keys(queue.redis, namespace) == before


def test_bad_dependency_lists_are_refused() -> None:
    with pytest.raises(InvalidInput, match="itself"):
        job("a", "a")
    with pytest.raises(InvalidInput, match="twice"):
        job("a", "b", "b")


def test_a_canceled_dependency_is_refused(queue: FairQueue) -> None:
    queue.push(job("gone", delay=60))
    queue.cancel("gone")
    with pytest.raises(InvalidInput, match="gone was canceled"):
        queue.push(job("child", "gone"))


def test_a_failed_dependency_leaves_dependents_deferred(queue: FairQueue) -> None:
    queue.push_many([job("parent", max_retries=0), job("child", "parent")])
    (parent,) = queue.pop()
    queue.fail(parent, "broken")
    info = queue.get("child")
    assert info is not None
    assert (info.state, info.blocked_by) == (TaskState.DEFERRED, ("parent",))


def test_cancel_cancels_dependents_and_cleans_both_directions(queue: FairQueue) -> None:
    queue.push_many([job("A"), job("C"), job("D", "A", "C"), job("E", "D"), job("F", "C")])
    assert queue.cancel("A")
    for task_id, reason in (("D", "dependency A was canceled"), ("E", "dependency D was canceled")):
        info = queue.get(task_id)
        assert info is not None
        assert (info.state, info.last_error) == (TaskState.CANCELED, reason)
    c_info = queue.get("C")
    assert c_info is not None
    assert c_info.dependents == ("F",)
    assert run_next(queue) == ["C"]
    assert run_next(queue) == ["F"]
    stats = queue.stats()
    assert (stats.states[TaskState.CANCELED], stats.states[TaskState.DEFERRED]) == (3, 0)


def test_dependents_are_released_once_when_blockers_finish_together(
    make_queue: Callable[[], FairQueue],
) -> None:
    pusher, left, right = make_queue(), make_queue(), make_queue()
    for round_ in range(30):
        a, b, joined = f"a{round_}", f"b{round_}", f"j{round_}"
        pusher.push_many([job(a), job(b), job(joined, a, b)])
        first, second = pusher.pop(count=2)
        threads = [threading.Thread(target=client.finish, args=(task,))
                   for client, task in ((left, first), (right, second))]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [task.task_id for task in pusher.pop(count=5)] == [joined]
        assert pusher.stats().states[TaskState.QUEUED] == 0


def test_a_long_chain_pushed_in_reverse(queue: FairQueue) -> None:
    chain = [job("n0")] + [job(f"n{i}", f"n{i - 1}") for i in range(1, 3000)]
    queue.push_many(list(reversed(chain)))
    assert queue.stats().states[TaskState.DEFERRED] == 2999
    assert run_next(queue) == ["n0"]
    assert run_next(queue) == ["n1"]


def test_retrying_a_failed_dependency_to_success_releases_dependents(queue: FairQueue) -> None:
    queue.push_many([job("parent", max_retries=0), job("child", "parent")])
    (parent,) = queue.pop()
    queue.fail(parent, "broken")
    assert queue.retry("child") is False  # deferred, not failed
    assert queue.retry("parent") is True
    assert queue.redis.ttl(f"{queue.namespace.prefix}task:parent") == -1  # kept again
    assert run_next(queue) == ["parent"]
    assert run_next(queue) == ["child"]
    assert queue.stats().counters["requeued"] == 1
    with pytest.raises(TaskNotFound):
        queue.retry("missing")


def test_stats_show_dependency_links_and_releases(queue: FairQueue) -> None:
    queue.push_many([job("A"), job("B"), job("C")])
    queue.push_many([job("D", "A", "B", "C"), job("E", "A", "B"), job("F", "C")])
    assert queue.stats().counters["dependency_links"] == 6
    by_id = {task.task_id: task for task in queue.pop(count=3)}
    queue.finish(by_id["A"])
    queue.finish(by_id["B"])
    counters = queue.stats().counters
    assert (counters["dependency_links"], counters["undeferred"]) == (2, 1)
    assert queue.cancel("D")  # it waited for C only by now
    assert queue.stats().counters["dependency_links"] == 1
    queue.finish(by_id["C"])
    counters = queue.stats().counters
    assert (counters["dependency_links"], counters["undeferred"]) == (0, 2)
    assert queue.stats().states[TaskState.DEFERRED] == 0


def test_reap_cancels_tasks_whose_dependency_expired(
    make_queue: Callable[..., FairQueue],
) -> None:
    queue = make_queue(QueueSettings(failed_ttl=0.05))
    queue.push_many(
        [job("parent", max_retries=0), job("child", "parent"), job("grandchild", "child")]
    )
    (parent,) = queue.pop()
    queue.fail(parent, "broken")
    assert wait_for(lambda: queue.reap().orphaned, timeout=5) == 1
    for task_id, reason in (
        ("child", "dependency parent no longer exists"),
        ("grandchild", "dependency child was canceled"),
    ):
        info = queue.get(task_id)
        assert info is not None
        assert (info.state, info.last_error) == (TaskState.CANCELED, reason)
    assert queue.stats().counters["dependency_links"] == 0
    assert queue.reap().orphaned == 0
