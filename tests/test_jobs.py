"""Strict-policy jobs (seed 003) on the engine: selection, retries, results, constraints."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timezone

import msgspec
import pytest

from fairque import DuplicateTask, FairQueue, InvalidInput, LeaseLost, QueueSettings, TaskState
from fairque.engine.calls import MAX_BATCH, Call
from fairque.jobs import (
    Constraint,
    Failure,
    Job,
    LeasedJob,
    Matcher,
    Success,
    failure,
)
from fairque.jobs.client import LEASE_GRACE, RESULT_TTL, JobQueue
from fairque.jobs.models import INT32_MAX, INT32_MIN
from tests.conftest import namespace_keys, wait_for

pytestmark = pytest.mark.cluster

FAST = QueueSettings(retry_backoff_base=0.05, retry_backoff_max=0.05)


@pytest.fixture
def make_jobs(make_queue: Callable[..., FairQueue]) -> Callable[..., JobQueue]:
    def make(
        settings: QueueSettings | None = None,
        *,
        result_ttl: float = RESULT_TTL,
        lease_grace: float = LEASE_GRACE,
    ) -> JobQueue:
        return JobQueue(make_queue(settings), result_ttl=result_ttl, lease_grace=lease_grace)

    return make


def fair(jobs: JobQueue) -> FairQueue:
    """The fair queue of the jobs' namespace, on the same connection pool."""
    namespace = jobs.namespace
    return FairQueue(namespace=namespace.name, executor=jobs.executor)


@pytest.fixture
def jobs(make_jobs: Callable[..., JobQueue]) -> JobQueue:
    return make_jobs(FAST)


def done(result: object = None) -> Success:
    return Success(finished_at=datetime.now(timezone.utc), result=result)


def pop_all(jobs: JobQueue, names: tuple[str, ...] = ()) -> list[LeasedJob]:
    return jobs.pop("w", 1000, names)


@pytest.mark.parametrize("seed", [1, 2])
def test_selection_order_with_random_int32_priorities(jobs: JobQueue, seed: int) -> None:
    rng = random.Random(seed)
    choices = [INT32_MIN, INT32_MAX, 0, -1, 1] + [rng.randint(-50, 50) for _ in range(5)]
    priorities = [rng.choice([*choices, rng.randint(INT32_MIN, INT32_MAX)]) for _ in range(300)]
    ids = []
    for start in range(0, 300, 50):  # several pushes, so ties span calls too
        batch = [Job(name="n", priority=p) for p in priorities[start : start + 50]]
        ids += jobs.push_many(batch)
    expected = [ids[i] for i in sorted(range(300), key=lambda i: (priorities[i], i))]
    popped = [job.id for _ in range(30) for job in jobs.pop("w", 10)]
    assert popped == expected
    assert jobs.pop("w") == []


def test_a_failed_job_competes_again_after_its_backoff(jobs: JobQueue) -> None:
    first = jobs.push(Job(name="n", priority=1, max_retry=2))
    [leased] = jobs.pop("w")
    assert jobs.complete(leased, failure("other", "boom")) is TaskState.SCHEDULED
    later = jobs.push(Job(name="n", priority=2))
    assert jobs.get(first).state == "scheduled"  # type: ignore[union-attr]
    # Once the backoff ends, the retried job wins again on priority.
    wait_for(fair(jobs).promote)
    retried = jobs.pop("w")
    assert [job.id for job in retried] == [first]
    assert retried[0].attempts == 1
    assert jobs.complete(retried[0], done(7)) is TaskState.FINISHED
    assert [job.id for job in jobs.pop("w")] == [later]


def test_max_retry_zero_never_retries_and_should_retry_false_stops(jobs: JobQueue) -> None:
    never = jobs.push(Job(name="n", max_retry=0, keep_result=True))
    stop = jobs.push(Job(name="n", max_retry=5))
    first, second = jobs.pop("w", 2)
    assert jobs.complete(first, failure("other", "x")) is TaskState.FAILED
    assert jobs.complete(second, failure("other", "y", retry=False)) is TaskState.FAILED
    info = jobs.get(never)
    assert info is not None
    assert info.state == "failed"
    assert info.last_error == "x"
    assert jobs.result(never)["type"] == "failure"
    assert jobs.get(stop).state == "failed"  # type: ignore[union-attr]


def test_the_fair_queue_refuses_to_read_a_job_as_a_task(jobs: JobQueue) -> None:
    job_id = jobs.push(Job(name="n"))
    with pytest.raises(InvalidInput, match=r"JobQueue\.get"):
        fair(jobs).get(job_id)


def test_result_is_read_once(jobs: JobQueue) -> None:
    kept = jobs.push(Job(name="n", keep_result=True))
    dropped = jobs.push(Job(name="n"))
    for leased in jobs.pop("w", 2):
        jobs.complete(leased, done({"answer": [1, 2]}))
    result = jobs.result(kept)
    assert result["type"] == "success"
    assert result["result"] == {"answer": [1, 2]}
    assert datetime.fromisoformat(result["finished_at"]).tzinfo is not None
    assert jobs.result(kept) is None
    assert jobs.result(dropped) is None
    assert jobs.result("no-such-job") is None


def test_a_result_nobody_reads_expires(make_jobs: Callable[..., JobQueue]) -> None:
    jobs = make_jobs(result_ttl=0.5)
    job_id = jobs.push(Job(name="n", keep_result=True))
    [leased] = jobs.pop("w")
    jobs.complete(leased, done(1))
    assert jobs.get(job_id).has_result  # type: ignore[union-attr]
    wait_for(lambda: not jobs.get(job_id).has_result, timeout=5)  # type: ignore[union-attr]
    assert jobs.result(job_id) is None


def test_a_push_sent_twice_is_stored_once(jobs: JobQueue) -> None:
    # More jobs than one EXISTS of the script looks at (1,000): every chunk is checked.
    call = jobs.ops.push([Job(name="n", priority=i % 3) for i in range(MAX_BATCH)])
    ids = jobs.executor.execute(call)
    with pytest.raises(DuplicateTask):
        jobs.executor.execute(call)
    assert fair(jobs).stats().states[TaskState.QUEUED] == MAX_BATCH
    popped = pop_all(jobs)
    assert [job.priority for job in popped[:3]] == [0, 0, 0]  # queued by priority
    assert {job.id for job in popped} <= set(ids)


def test_stale_lease_cannot_complete(jobs: JobQueue) -> None:
    jobs.push(Job(name="n"))
    [leased] = jobs.pop("w")
    leased.lease_token = "0"
    with pytest.raises(LeaseLost):
        jobs.complete(leased, done())


def test_outcomes_recorded_together_each_stand_on_their_own(
    make_jobs: Callable[..., JobQueue],
) -> None:
    jobs = make_jobs(QueueSettings(max_payload_bytes=200))
    ids = [jobs.push(Job(name="n", keep_result=True, max_retry=1)) for _ in range(5)]
    leased = {job.id: job for job in jobs.pop("w", 5)}
    first, lost, big, failing, released = (leased[job_id] for job_id in ids)
    lost.lease_token = "0"
    oops = Failure(finished_at=datetime.now(timezone.utc), reason="other", should_retry=True)
    states = jobs.complete_many([
        (first, done(1)), (lost, done(2)), (big, done("x" * 500)), (failing, oops),
        (released, None),
    ])  # fmt: skip
    assert states[0] is TaskState.FINISHED
    assert isinstance(states[1], LeaseLost)
    assert isinstance(states[2], InvalidInput)
    assert states[2].field == "result"
    assert states[3:] == [TaskState.SCHEDULED, TaskState.QUEUED]  # to retry; handed back
    assert jobs.result(first.id)["result"] == 1
    assert [(job.id, job.attempts) for job in jobs.pop("w", 5)] == [(released.id, 0)]
    assert jobs.get(failing.id).state == "scheduled"  # type: ignore[union-attr]
    # The refused and the lost ones still hold their leases (the lost one: its own).
    assert jobs.complete(big, done(3)) is TaskState.FINISHED
    assert jobs.get(lost.id).state == "started"  # type: ignore[union-attr]


def test_an_expired_lease_returns_the_job(make_jobs: Callable[..., JobQueue]) -> None:
    jobs = make_jobs(FAST, lease_grace=0.0)
    job_id = jobs.push(Job(name="n", timeout=0.05, max_retry=1))
    [leased] = jobs.pop("w")
    again = wait_for(lambda: jobs.pop("w"))
    assert [job.id for job in again] == [job_id]
    assert again[0].attempts == 1
    with pytest.raises(LeaseLost):
        jobs.complete(leased, done())
    # Its retries used up, the next expiry fails it.
    wait_for(lambda: fair(jobs).reap().expired)
    assert jobs.get(job_id).state == "failed"  # type: ignore[union-attr]


def test_release_puts_it_back_without_an_attempt(jobs: JobQueue) -> None:
    job_id = jobs.push(Job(name="n"))
    [leased] = jobs.pop("w")
    assert jobs.release(leased) is TaskState.QUEUED
    [again] = jobs.pop("w")
    assert (again.id, again.attempts) == (job_id, 0)


def test_workers_take_only_the_names_they_serve(jobs: JobQueue) -> None:
    a = jobs.push(Job(name="a", priority=5))
    b = jobs.push(Job(name="b", priority=1))
    assert [job.id for job in jobs.pop("w", 5, ["a", "c"])] == [a]
    assert [job.id for job in jobs.pop("w", 5, ["b"])] == [b]


def test_cancel_retry_stats_and_listing(jobs: JobQueue) -> None:
    ids = jobs.push_many([Job(name="a", priority=i) for i in range(5)] + [Job(name="b")])
    stats = fair(jobs).stats()
    assert stats.states[TaskState.QUEUED] == 6
    assert stats.counters["pushed"] == 6
    assert fair(jobs).cancel(ids[0])
    queued = jobs.jobs("queued", "a", limit=2)
    assert [job.id for job in queued.jobs] == ids[1:3]
    rest = jobs.jobs("queued", "a", cursor=queued.cursor, limit=10)
    assert [job.id for job in rest.jobs] == ids[3:5]
    assert rest.cursor == 0
    assert [job.id for job in jobs.jobs("queued").jobs] == [*ids[1:5], ids[5]]
    assert [job.id for job in jobs.jobs("canceled").jobs] == [ids[0]]
    assert jobs.jobs("canceled", "b").jobs == []
    leased = jobs.pop("w", 1, ["b"])
    assert [job.state for job in jobs.jobs("started").jobs] == ["started"]
    # A strict job that runs is never aborted: its constraints count it until it ends.
    assert not jobs.cancel(leased[0].id)
    assert not fair(jobs).cancel(leased[0].id)
    jobs.complete(leased[0], failure("other", "no", retry=False))
    [failed] = jobs.jobs("failed", "b").jobs
    assert (failed.id, failed.name, failed.priority) == (ids[5], "b", 0)
    assert fair(jobs).retry(ids[5])
    assert [job.id for job in jobs.pop("w", 1, ["b"])] == [ids[5]]
    with pytest.raises(InvalidInput) as error:
        jobs.jobs("lost")
    assert error.value.field == "state"


@pytest.mark.parametrize(
    ("job", "field"),
    [
        (Job(name="n", priority=INT32_MAX + 1), "priority"),
        (Job(name="n", priority=INT32_MIN - 1), "priority"),
        (Job(name="n", timeout=-1), "timeout"),
        (Job(name="n", max_retry=-1), "max_retry"),
        (Job(name=""), "name"),
        (Job(name="a\nb"), "name"),
        (Job(name="n", priority="high"), "priority"),  # type: ignore[arg-type]
        (Job(name="n", keep_result="yes"), "keep_result"),  # type: ignore[arg-type]
        (Job(name="n", argument=object()), "argument"),
        (Job(name="n", argument="x" * (1 << 21)), "argument"),
    ],
)
def test_bad_jobs_are_refused_and_nothing_is_written(
    jobs: JobQueue, job: Job, field: str, namespace: str
) -> None:
    jobs.push(Job(name="ok"))
    before = namespace_keys(jobs.executor.client, namespace)
    with pytest.raises(InvalidInput) as error:
        jobs.push_many([Job(name="fine"), job])
    assert error.value.field == f"[1].{field}"  # the second job of the batch
    assert namespace_keys(jobs.executor.client, namespace) == before


def test_the_script_refuses_what_the_client_should_have(jobs: JobQueue) -> None:
    call = jobs.ops.push([Job(name="n")])
    head, arguments = call.args[:-3], call.args[-1:]
    for rows, field in (  # the rows one after the other, 6 values each
        (["x", "n", 2**31, 0, 30, 0], "priority"),
        (["", "n", 0, 0, 30, 0], "id"),
        (["x", "n"], "jobs"),
        ([], "jobs"),
    ):
        bad = (*head, 1, msgspec.msgpack.encode(rows), *arguments)
        with pytest.raises(InvalidInput) as error:
            jobs.executor.execute(Call(call.script, call.keys, bad, call.parse))
        assert error.value.field == field
    assert fair(jobs).stats().counters == {}


def test_bad_constraints_are_refused(jobs: JobQueue) -> None:
    cases = [
        ({"match": [], "concurrency": None, "rate": None}, "body"),
        ({"match": [{"field": "size", "op": "equals", "value": 1}], "concurrency": 1}, "match[0]"),
        ({"match": [{"field": "name", "op": "in", "value": "a"}], "concurrency": 1}, "match[0]"),
        ({"match": [{"field": "name", "op": "prefix", "value": 1}], "concurrency": 1}, "match[0]"),
        ({"match": [], "concurrency": 0}, "concurrency"),
    ]
    for data, field in cases:
        with pytest.raises(InvalidInput) as error:
            jobs.set_constraint("c", data)  # type: ignore[arg-type]
        assert error.value.field.startswith(field.split("[")[0]), data
    with pytest.raises(InvalidInput):
        jobs.set_constraint("bad id!", Constraint(match=[], concurrency=1))
    assert jobs.constraints() == []


def by_name(name: str) -> list[Matcher]:
    return [Matcher(field="name", op="equals", value=name)]


def test_concurrency_limit_never_blocks_other_jobs(jobs: JobQueue) -> None:
    jobs.set_constraint("one-a", Constraint(match=by_name("a"), concurrency=1))
    a1, a2 = jobs.push_many([Job(name="a"), Job(name="a")])
    b = jobs.push(Job(name="b", priority=10))
    first = pop_all(jobs)
    assert [job.id for job in first] == [a1, b]
    [status] = jobs.constraints()
    assert (status.id, status.running, status.started) == ("one-a", 1, 0)
    assert pop_all(jobs) == []
    jobs.complete(first[0], done())
    assert [job.id for job in pop_all(jobs)] == [a2]


def test_rate_limit_lets_n_start_per_period(jobs: JobQueue) -> None:
    jobs.set_constraint("slow", Constraint(match=by_name("a"), rate=2, period=0.5))
    ids = jobs.push_many([Job(name="a") for _ in range(3)])
    first = pop_all(jobs)
    assert [job.id for job in first] == ids[:2]
    assert jobs.constraints()[0].started == 2
    for job in first:
        jobs.complete(job, done())  # finishing does not give back rate
    assert pop_all(jobs) == []
    assert [job.id for job in wait_for(lambda: pop_all(jobs))] == ids[2:]


@pytest.mark.parametrize(
    ("matcher", "matching"),
    [
        (Matcher(field="argument.user", op="equals", value="ann"), [0]),
        (Matcher(field="argument.user", op="in", value=["ann", "bob"]), [0, 1]),
        (Matcher(field="argument.user", op="prefix", value="b"), [1, 2]),
        (Matcher(field="argument.size.w", op="equals", value=3), [2]),
        (Matcher(field="argument", op="equals", value=5), [3]),
        (Matcher(field="name", op="prefix", value="img."), [0, 1, 2, 3, 4]),
    ],
)
def test_matchers(jobs: JobQueue, matcher: Matcher, matching: list[int]) -> None:
    jobs.set_constraint("c", Constraint(match=[matcher], concurrency=1))
    arguments = [{"user": "ann"}, {"user": "bob"}, {"user": "bea", "size": {"w": 3}}, 5, None]
    ids = jobs.push_many([Job(name="img.resize", argument=a) for a in arguments])
    popped = [job.id for job in pop_all(jobs)]
    # One matching job runs; the others that match wait, every other job runs.
    held = [ids[i] for i in matching[1:]]
    assert popped == [job_id for job_id in ids if job_id not in held]


def test_a_constraint_applies_to_jobs_already_queued_and_goes_away(jobs: JobQueue) -> None:
    ids = jobs.push_many([Job(name="a") for _ in range(3)])
    assert jobs.set_constraint("c", Constraint(match=by_name("a"), concurrency=1)) == 3
    assert [job.id for job in pop_all(jobs)] == ids[:1]
    assert jobs.delete_constraint("c") == 2
    assert [job.id for job in pop_all(jobs)] == ids[1:]
    assert jobs.constraints() == []


def test_a_job_in_two_constraints_needs_room_in_both(jobs: JobQueue) -> None:
    jobs.set_constraint("a", Constraint(match=by_name("x"), concurrency=2))
    arg = [Matcher(field="argument.k", op="equals", value=1)]
    jobs.set_constraint("k", Constraint(match=arg, concurrency=1))
    ids = jobs.push_many([Job(name="x", argument={"k": 1}), Job(name="x", argument={"k": 1})])
    third = jobs.push(Job(name="x", argument={"k": 2}))
    assert [job.id for job in pop_all(jobs)] == [ids[0], third]
    statuses = {status.id: status.running for status in jobs.constraints()}
    assert statuses == {"a": 2, "k": 1}


ONE_A = Constraint(match=by_name("a"), concurrency=1)


def test_a_new_constraint_counts_the_jobs_already_running(jobs: JobQueue) -> None:
    _, second = jobs.push_many([Job(name="a"), Job(name="a", priority=1)])
    [running] = jobs.pop("w")
    assert jobs.set_constraint("c", ONE_A) == 1  # the queued one moved
    [status] = jobs.constraints()
    assert status.running == 1
    assert pop_all(jobs) == []  # the running one holds the only slot
    jobs.complete(running, done())
    assert [job.id for job in pop_all(jobs)] == [second]


def test_a_changed_or_deleted_constraint_lets_running_jobs_go(jobs: JobQueue) -> None:
    jobs.set_constraint("c", ONE_A)
    jobs.push_many([Job(name="a"), Job(name="a"), Job(name="b")])
    assert len(pop_all(jobs, ("a",))) == 1  # one "a" runs
    # Changed to select "b" only: the running "a" counts no more, the running "b" does.
    [b] = pop_all(jobs, ("b",))
    jobs.set_constraint("c", Constraint(match=by_name("b"), concurrency=1))
    assert jobs.constraints()[0].running == 1
    assert len(pop_all(jobs, ("a",))) == 1
    # A constraint re-created after it was deleted counts what runs then, once.
    jobs.delete_constraint("c")
    jobs.set_constraint("c", Constraint(match=by_name("b"), concurrency=1))
    assert jobs.constraints()[0].running == 1
    jobs.complete(b, done())
    assert jobs.constraints()[0].running == 0


def test_a_constraint_applies_to_a_job_waiting_for_its_retry(jobs: JobQueue) -> None:
    retried = jobs.push(Job(name="a", max_retry=1))
    [leased] = jobs.pop("w")
    assert jobs.complete(leased, failure("other", "boom")) is TaskState.SCHEDULED
    jobs.set_constraint("c", ONE_A)  # while it waits for its backoff
    later = jobs.push(Job(name="a", priority=5))
    [running] = jobs.pop("w")
    assert running.id == later
    wait_for(lambda: fair(jobs).promote() or jobs.get(retried).state == "queued")  # type: ignore[union-attr]
    assert pop_all(jobs) == []  # its retry waits for the slot
    jobs.complete(running, done())
    assert [job.id for job in pop_all(jobs)] == [retried]


def test_a_constraint_applies_to_a_failed_job_retried_later(jobs: JobQueue) -> None:
    failed = jobs.push(Job(name="a"))
    [leased] = jobs.pop("w")
    assert jobs.complete(leased, failure("other", "boom")) is TaskState.FAILED
    jobs.set_constraint("c", ONE_A)
    jobs.push(Job(name="a"))
    [running] = jobs.pop("w")
    assert jobs.retry(failed)
    assert pop_all(jobs) == []
    jobs.complete(running, done())
    assert [job.id for job in pop_all(jobs)] == [failed]


def test_a_job_that_waited_out_a_changed_constraint_is_not_held_by_it(jobs: JobQueue) -> None:
    jobs.set_constraint("c", ONE_A)
    retried = jobs.push(Job(name="a", max_retry=1))
    [leased] = jobs.pop("w")
    jobs.complete(leased, failure("other", "boom"))  # scheduled, in partition "c|a"
    jobs.set_constraint("c", Constraint(match=by_name("b"), concurrency=1))
    jobs.push(Job(name="b"))
    assert len(pop_all(jobs, ("b",))) == 1  # "c" is full, but it selects "b" jobs now
    wait_for(lambda: fair(jobs).promote() or jobs.get(retried).state == "queued")  # type: ignore[union-attr]
    assert [job.id for job in pop_all(jobs)] == [retried]


def test_failure_model_requires_seed_fields() -> None:
    with pytest.raises(TypeError):
        Failure(finished_at=datetime.now(timezone.utc))  # type: ignore[call-arg]
