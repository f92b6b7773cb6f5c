"""The TaskScheduler on real servers: schedules, the execution cycle, locks, failures."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import msgspec
import pytest

from fairque import AsyncFairQueue, FairQueue, FairQueueError, InvalidInput, QueueSettings
from fairque.errors import DuplicateSchedule, ScheduleChanged, ScheduleNotFound
from fairque.runners.scheduler import AsyncTaskScheduler, TaskScheduler
from fairque.scheduler import (
    HealthStatus,
    MissedRuns,
    Schedule,
    SchedulerConfig,
    ScheduleState,
)
from fairque.scheduler.ops import Claim
from fairque.servers.embedded import LocalServer, free_port
from tests.conftest import Server, until, wait_for

pytestmark = pytest.mark.cluster

FAST = SchedulerConfig(poll_interval=0.05, lock_timeout=5, retry_backoff_base=0.05)
TEMPLATE = {"name": "report", "user_id": "alice", "args": [1], "kwargs": {"pages": 2}}


@pytest.fixture
def scheduler(server: Server, namespace: str) -> Iterator[TaskScheduler]:
    made = TaskScheduler(server.url, namespace, config=FAST)
    yield made
    made.close()


@pytest.fixture
async def instance(server: Server, namespace: str) -> AsyncIterator[AsyncTaskScheduler]:
    made = AsyncTaskScheduler(server.url, namespace, config=FAST)
    yield made
    await made.close()


async def wait_server_time_past(queue: AsyncFairQueue, moment: float) -> None:
    async def passed() -> bool:
        seconds, micros = await queue.redis.time()
        return bool(seconds + micros / 1e6 > moment)

    await until(passed, timeout=10)


async def add_due(
    instance: AsyncTaskScheduler, late: float = 0.0, **fields: Any
) -> tuple[str, datetime]:
    """Adds an hourly schedule whose first run comes due in 200 ms, and waits until it is
    due (and ``late`` seconds more). A start already past when the schedule is stored
    would mean a first run an hour later, hence the margin, and the connection set up
    (a cluster client learns the slots) before the clock is read."""
    await instance.list_schedules()
    start = datetime.now(timezone.utc) + timedelta(milliseconds=200)
    sid = await instance.add_schedule(
        **{"interval": 3600, "start_at": start, "task": TEMPLATE, **fields}
    )
    await wait_server_time_past(queue_of(instance), start.timestamp() + late)
    return sid, start


def queue_of(scheduler: AsyncTaskScheduler) -> AsyncFairQueue:
    """The fair queue the scheduler submits to, on the scheduler's connection pool."""
    namespace = scheduler.ops.namespace
    return AsyncFairQueue(namespace=namespace.name, executor=scheduler.executor)


def sync_queue_of(scheduler: TaskScheduler) -> FairQueue:
    """:func:`queue_of` for the blocking scheduler."""
    namespace = scheduler.ops.namespace
    return FairQueue(namespace=namespace.name, executor=scheduler.executor)


def lock_of(queue: AsyncFairQueue, schedule_id: str) -> str:
    """The key of the scheduler's lock on one schedule."""
    return queue.namespace.key(f"scheduler:lock:{schedule_id}")


def server_now(queue: FairQueue) -> float:
    seconds, micros = queue.redis.time()
    return seconds + micros / 1e6


# --- schedules -------------------------------------------------------------------------


def test_a_schedule_is_stored_with_its_next_run(scheduler: TaskScheduler) -> None:
    sid = scheduler.add_schedule(cron="30 6 * * *", timezone="Asia/Tokyo", task=TEMPLATE)
    info = scheduler.get_schedule(sid)
    assert info.state is ScheduleState.ACTIVE
    assert info.schedule.task.name == "report"
    assert info.version == 1
    assert info.runs == 0
    assert info.next_run is not None
    local = datetime.fromtimestamp(info.next_run, timezone.utc).astimezone(
        __import__("zoneinfo").ZoneInfo("Asia/Tokyo")
    )
    assert (local.hour, local.minute, local.second) == (6, 30, 0)
    assert 0 < info.next_run - server_now(sync_queue_of(scheduler)) <= 24 * 3600


def test_other_instances_see_the_changes(server: Server, namespace: str) -> None:
    with (
        TaskScheduler(server.url, namespace) as first,
        TaskScheduler(server.url, namespace) as second,
    ):
        sid = first.add_schedule(interval=60, task=TEMPLATE, schedule_id="hourly-ish")
        assert [info.schedule_id for info in second.list_schedules()] == ["hourly-ish"]
        second.update_schedule(sid, interval=30)
        assert first.get_schedule(sid).schedule.interval == 30
        first.remove_schedule(sid)
        assert second.list_schedules() == []


def test_an_interval_schedule_runs_on_a_grid_from_its_start(scheduler: TaskScheduler) -> None:
    start = datetime.now(timezone.utc) + timedelta(hours=1)
    sid = scheduler.add_schedule(interval=90, start_at=start, task=TEMPLATE)
    assert scheduler.get_schedule(sid).next_run == pytest.approx(start.timestamp())
    unanchored = scheduler.add_schedule(interval=90, task=TEMPLATE)
    info = scheduler.get_schedule(unanchored)
    assert info.schedule.start_at is not None
    assert info.next_run == pytest.approx(info.schedule.start_at.timestamp())


def test_an_update_takes_a_new_timing_and_keeps_the_history(scheduler: TaskScheduler) -> None:
    sid = scheduler.add_schedule(cron="0 * * * *", task=TEMPLATE)
    updated = scheduler.update_schedule(sid, interval=5, task={**TEMPLATE, "priority": 5})
    assert updated.schedule.cron is None
    assert updated.schedule.interval == 5
    assert updated.schedule.task.priority == 5
    assert updated.version == 2
    back = scheduler.update_schedule(sid, cron="*/10 * * * *")
    assert back.schedule.interval is None
    assert back.schedule.start_at is None


def test_an_update_on_a_stale_read_is_refused(scheduler: TaskScheduler) -> None:
    sid = scheduler.add_schedule(interval=5, task=TEMPLATE)
    stale = scheduler.get_schedule(sid)
    scheduler.update_schedule(sid, interval=6)
    save = scheduler.ops.save(stale.schedule, 0, "update", stale.version)
    with pytest.raises(ScheduleChanged):
        scheduler.executor.execute(save)
    assert scheduler.get_schedule(sid).schedule.interval == 6


def test_missing_and_duplicate_schedules_are_refused(scheduler: TaskScheduler) -> None:
    scheduler.add_schedule(interval=5, task=TEMPLATE, schedule_id="one")
    with pytest.raises(DuplicateSchedule):
        scheduler.add_schedule(interval=7, task=TEMPLATE, schedule_id="one")
    assert scheduler.get_schedule("one").schedule.interval == 5
    for call in (
        lambda: scheduler.get_schedule("none"),
        lambda: scheduler.remove_schedule("none"),
        lambda: scheduler.update_schedule("none", interval=3),
        lambda: scheduler.pause_schedule("none"),
        lambda: scheduler.resume_schedule("none"),
    ):
        with pytest.raises(ScheduleNotFound, match="none"):
            call()
    with pytest.raises(InvalidInput, match="schedule_id"):
        scheduler.update_schedule("one", schedule_id="two")
    with pytest.raises(TypeError):
        scheduler.add_schedule(
            Schedule.model_validate({"interval": 5, "task": TEMPLATE}), interval=6
        )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cron": "61 * * * *"}, "cron: minute field: 61 out of range 0-59"),
        ({"cron": "* 24 * * *"}, "hour field: 24 out of range 0-23"),
        ({"cron": "* * 0 * *"}, "day-of-month field: 0 out of range 1-31"),
        ({"cron": "* * * 13 *"}, "month field: 13 out of range 1-12"),
        ({"cron": "* * * * 8"}, "day-of-week field: 8 out of range 0-7"),
        ({"cron": "0 0 30 2 *"}, "day-of-month field: 30 never occurs"),
        ({"cron": "*/0 * * * *"}, "minute field: '*/0' is not valid"),
        ({"cron": "60 * * * * *"}, "second field: 60 out of range 0-59"),
        ({"cron": "* * *"}, "expected 5 fields"),
        ({"cron": "@sometimes"}, "expected 5 fields"),
        ({"cron": "* * * * *", "timezone": "Mars/Base"}, "timezone: unknown time zone"),
        ({"interval": 5, "timezone": "Nowhere"}, "timezone: unknown time zone"),
        ({"interval": 0}, "interval"),
        ({"interval": -1}, "interval"),
        ({}, "give either cron or interval"),
        ({"cron": "* * * * *", "interval": 5}, "give either cron or interval"),
        ({"cron": "* * * * *", "start_at": datetime.now(timezone.utc)}, "start_at"),
        ({"interval": 5, "start_at": datetime(2030, 1, 1)}, "start_at"),
        ({"interval": 5, "task": {}}, "task.name"),
        ({"interval": 5, "task": {"name": "", "user_id": "u"}}, "task.name"),
        ({"interval": 5, "task": {"name": "x", "user_id": "u", "priority": 0}}, "priority"),
        ({"interval": 5, "task": {"name": "x", "user_id": "u", "extra": 1}}, "task.extra"),
        ({"interval": 5, "missed": "sometimes"}, "missed"),
    ],
)
def test_invalid_schedules_are_refused_naming_the_part(
    scheduler: TaskScheduler, fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message.replace("*", r"\*")):
        scheduler.add_schedule(**{"task": TEMPLATE, **fields})
    assert scheduler.list_schedules() == []


def test_cron_macros_are_understood(scheduler: TaskScheduler) -> None:
    sid = scheduler.add_schedule(cron="@hourly", task=TEMPLATE)
    next_run = scheduler.get_schedule(sid).next_run
    assert next_run is not None
    assert next_run % 3600 == 0


def test_invalid_config_is_refused() -> None:
    with pytest.raises(InvalidInput, match="poll_interval"):
        SchedulerConfig(poll_interval=0)
    with pytest.raises(InvalidInput, match="instance_id"):
        SchedulerConfig(instance_id="")
    with pytest.raises(InvalidInput, match="instance_ttl: must be longer than 4 s"):
        SchedulerConfig(poll_interval=1, instance_ttl=3)


# --- the execution cycle ---------------------------------------------------------------


async def runs_of(queue: AsyncFairQueue, schedule_id: str) -> list[int]:
    """The due times of the runs queued for a schedule, from their task ids, in order."""
    tasks = await queue.pop(count=1000, lease_seconds=60)
    mine = [task for task in tasks if task.task_id.startswith(schedule_id)]
    return sorted(int(task.task_id.split("@")[1]) for task in mine)


async def test_a_due_run_is_queued_with_its_template(instance: AsyncTaskScheduler) -> None:
    sid, start = await add_due(instance)
    assert await instance.runner.cycle() == 0.0
    [task] = await queue_of(instance).pop(lease_seconds=60)
    assert task.task_id == f"{sid}@{round(start.timestamp() * 1e6)}"
    assert task.name == "report"
    assert task.user_id == "alice"
    assert task.payload == {"args": [1], "kwargs": {"pages": 2}}
    info = await instance.get_schedule(sid)
    assert info.runs == 1
    assert info.last_task_id == task.task_id
    assert info.last_run == pytest.approx(start.timestamp())
    assert info.next_run == pytest.approx(start.timestamp() + 3600)
    assert instance.metrics.submitted == 1
    assert instance.metrics.latency[0] >= 0
    pause = await instance.runner.cycle()  # nothing due: wait, at most a poll interval
    assert 0 < pause <= FAST.poll_interval
    assert await queue_of(instance).pop() == []


async def test_two_instances_submit_each_run_once(
    server: Server, namespace: str, instance: AsyncTaskScheduler
) -> None:
    other = AsyncTaskScheduler(server.url, namespace, config=FAST)
    ids = [await instance.add_schedule(interval=0.2, task=TEMPLATE) for _ in range(3)]
    runs = [asyncio.create_task(s.run()) for s in (instance, other)]

    async def enough() -> bool:
        infos = await instance.list_schedules()
        return all(info.runs >= 8 for info in infos)

    await until(enough, timeout=30)
    for s in (instance, other):
        s.stop()
    await asyncio.gather(*runs)
    await other.close()
    queued = await queue_of(instance).pop(count=1000, lease_seconds=60)
    for sid in ids:
        info = await instance.get_schedule(sid)
        times = sorted(int(t.task_id.split("@")[1]) for t in queued if t.task_id.startswith(sid))
        assert len(times) == info.runs == len(set(times))
        steps = {b - a for a, b in itertools.pairwise(times)}
        assert steps == {200_000}  # every grid point, none twice, none missed
    pushed = (await queue_of(instance).stats()).counters["pushed"]
    submitted = instance.metrics.submitted + other.metrics.submitted
    assert pushed == submitted
    assert instance.metrics.failed == other.metrics.failed == 0


async def add_due_together(instance: AsyncTaskScheduler, count: int) -> tuple[list[str], int]:
    """Adds ``count`` hourly schedules whose first runs all come due at the same moment;
    returns their ids and that moment (us). The moment must come after the last one is
    stored (a start already past when a schedule is stored means a first run an hour
    later), so where storing took longer than the room left (a loaded machine), they are
    removed and added again with four times the room. Waiting for it is the caller's."""
    await instance.list_schedules()
    room = 0.4 + count * 0.006
    for _ in range(4):
        start = datetime.now(timezone.utc) + timedelta(seconds=room)
        ids = [
            await instance.add_schedule(
                interval=3600, start_at=start, task={**TEMPLATE, "user_id": f"tenant-{n % 7}"}
            )
            for n in range(count)
        ]
        seconds, micros = await queue_of(instance).redis.time()
        if seconds + micros / 1e6 < start.timestamp():
            return ids, round(start.timestamp() * 1e6)
        for sid in ids:
            await instance.remove_schedule(sid)
        room *= 4
    raise AssertionError(f"storing {count} schedules took longer than {room / 4:.0f} s")


async def pushed(queue: AsyncFairQueue) -> int:
    return (await queue.stats()).counters.get("pushed", 0)


async def test_a_cycle_queues_a_batch_of_due_runs_in_one_go(server: Server, namespace: str) -> None:
    config = FAST.model_copy(update={"batch": 50})
    async with AsyncTaskScheduler(server.url, namespace, config=config) as instance:
        ids, due = await add_due_together(instance, 120)
        queue = queue_of(instance)
        await wait_server_time_past(queue, due / 1e6)
        assert await instance.runner.cycle() == 0.0  # more may be due: no wait
        assert await pushed(queue) == 50
        assert await instance.runner.cycle() == 0.0
        assert await pushed(queue) == 100
        assert await instance.runner.cycle() == 0.0
        assert await pushed(queue) == 120
        assert await instance.runner.cycle() > 0  # nothing due any more
        assert instance.metrics.submitted == 120
        assert instance.metrics.cycles == 4
        tasks = await queue.pop(count=1000, lease_seconds=60)
        assert sorted(task.task_id for task in tasks) == sorted(f"{sid}@{due}" for sid in ids)
        infos = await instance.list_schedules()
        assert {info.runs for info in infos} == {1}
        assert {info.next_run for info in infos} == {due / 1e6 + 3600}


async def test_instances_claim_different_due_schedules(instance: AsyncTaskScheduler) -> None:
    ids, due = await add_due_together(instance, 120)
    ops, queue = instance.ops, queue_of(instance)
    await wait_server_time_past(queue, due / 1e6)
    claims = [await claim(instance, token, batch=50) for token in ("one", "two", "three")]
    assert [len(c.grants) for c in claims] == [50, 50, 20]
    assert [c.busy for c in claims] == [0, 50, 100]  # passed over the others' locks
    claimed = [grant.schedule_id for c in claims for grant in c.grants]
    assert sorted(claimed) == sorted(ids)  # each one once
    late = await claim(instance, "four", batch=50)
    assert (late.grants, late.busy) == ([], 120)
    for c in claims:
        outcomes = await queue.execute(ops.fire([ops.firing(grant) for grant in c.grants]))
        assert all(isinstance(outcome, int) for outcome in outcomes)
    assert await pushed(queue) == 120
    assert await queue.redis.exists(*(lock_of(queue, sid) for sid in ids)) == 0  # released


async def test_many_runs_due_at_once_are_queued_once_by_racing_instances(
    server: Server, namespace: str, instance: AsyncTaskScheduler
) -> None:
    config = FAST.model_copy(update={"batch": 20})
    racing = [AsyncTaskScheduler(server.url, namespace, config=config) for _ in range(3)]
    ids, due = await add_due_together(instance, 150)
    runs = [asyncio.create_task(s.run()) for s in racing]  # idle until the runs come due
    queue = queue_of(instance)

    async def all_queued() -> bool:
        return await pushed(queue) >= len(ids)

    await until(all_queued, timeout=30)
    for s in racing:
        s.stop()
    await asyncio.gather(*runs)
    for s in racing:
        await s.close()
    tasks = await queue.pop(count=1000, lease_seconds=60)
    assert sorted(task.task_id for task in tasks) == sorted(f"{sid}@{due}" for sid in ids)
    assert await pushed(queue) == len(ids)
    assert {info.runs for info in await instance.list_schedules()} == {1}
    assert sum(s.metrics.submitted for s in racing) == len(ids)
    assert sum(s.metrics.failed for s in racing) == 0


async def claim(instance: AsyncTaskScheduler, token: str, batch: int = FAST.batch) -> Claim:
    """A claim of at most ``batch`` due schedules with ``token``, as an instance's cycle
    makes it."""
    config = FAST.model_copy(update={"batch": batch})
    call = instance.ops.claim(token, {"state": "running"}, token, config)
    return await queue_of(instance).execute(call)


async def test_a_stale_plan_is_refused(instance: AsyncTaskScheduler) -> None:
    sid, _start = await add_due(instance)
    ops, queue = instance.ops, queue_of(instance)
    [grant] = (await claim(instance, "me")).grants
    held = await claim(instance, "other")
    assert (held.grants, held.busy) == ([], 1)  # the lock is held
    await instance.update_schedule(sid, task={**TEMPLATE, "user_id": "bob"})
    assert await queue.execute(ops.fire([ops.firing(grant)])) == [None]
    assert await queue.pop() == []
    assert await queue.redis.exists(lock_of(queue, sid)) == 0  # released


async def test_a_lock_taken_over_by_another_instance_is_not_released(
    instance: AsyncTaskScheduler,
) -> None:
    sid, _start = await add_due(instance)
    ops, queue = instance.ops, queue_of(instance)
    [grant] = (await claim(instance, "me")).grants
    lock = lock_of(queue, sid)
    await queue.redis.set(lock, "other")  # our lock expired and another instance took it
    assert await queue.execute(ops.fire([ops.firing(grant)])) == [None]
    assert await queue.execute(ops.unlock({sid: "me"})) == 0
    assert await queue.redis.get(lock) == b"other"
    assert await queue.execute(ops.unlock({sid: "other"})) == 1
    assert await queue.redis.exists(lock) == 0
    assert await queue.pop() == []


async def test_a_dead_instances_lock_expires_and_another_takes_over(
    instance: AsyncTaskScheduler,
) -> None:
    sid, _start = await add_due(instance)
    queue = queue_of(instance)
    await queue.redis.set(lock_of(queue, sid), "dead-instance:1", px=600)
    run = asyncio.create_task(instance.run())

    async def submitted() -> bool:
        return (await instance.get_schedule(sid)).runs == 1

    await until(submitted, timeout=10)
    instance.stop()
    await run
    assert instance.metrics.lock_busy >= 1  # it waited for the dead holder's lock
    assert len(await runs_of(queue, sid)) == 1


@pytest.mark.parametrize("policy", list(MissedRuns))
async def test_missed_runs_never_come_as_a_burst(
    instance: AsyncTaskScheduler, policy: MissedRuns
) -> None:
    sid = await instance.add_schedule(interval=0.1, missed=policy, misfire_grace=0.2, task=TEMPLATE)
    first = (await instance.get_schedule(sid)).next_run
    assert first is not None
    await wait_server_time_past(queue_of(instance), first + 0.55)  # all instances were down
    await instance.runner.cycle()
    await instance.runner.cycle()
    info = await instance.get_schedule(sid)
    times = await runs_of(queue_of(instance), sid)
    if policy is MissedRuns.RUN_ONCE:
        # The missed runs became one; after it, at most the runs that came due after the
        # outage, on time, if a slow machine let the second cycle come after one.
        assert len(times) == info.runs
        assert times[0] == round(first * 1e6)
        assert all(time > round((first + 0.55) * 1e6) for time in times[1:])
    else:
        # None of the missed runs; at most the first run after the outage, if a slow
        # machine let the second cycle come after it.
        assert all(time > round((first + 0.55) * 1e6) for time in times)
        assert len(times) <= 1
        assert info.skipped == 1
    assert info.next_run is not None
    assert info.next_run > first + 0.55


async def test_runs_late_within_the_grace_time_are_caught_up_one_by_one(
    instance: AsyncTaskScheduler,
) -> None:
    sid = await instance.add_schedule(interval=0.1, task=TEMPLATE)
    first = (await instance.get_schedule(sid)).next_run
    assert first is not None
    await wait_server_time_past(queue_of(instance), first + 0.55)  # a short outage
    pauses = [await instance.runner.cycle() for _ in range(12)]
    assert pauses[0] == 0.0  # a cycle that submitted looks again at once
    times = await runs_of(queue_of(instance), sid)
    assert len(times) >= 6
    assert times[0] == round(first * 1e6)
    assert {b - a for a, b in itertools.pairwise(times)} == {100_000}


@pytest.mark.parametrize(("grace", "runs"), [(30, 1), (0.1, 0)])
async def test_a_run_later_than_the_grace_time_is_missed(
    instance: AsyncTaskScheduler, grace: float, runs: int
) -> None:
    sid, _start = await add_due(instance, late=0.3, missed="skip", misfire_grace=grace)
    await instance.runner.cycle()
    assert len(await runs_of(queue_of(instance), sid)) == runs
    assert (await instance.get_schedule(sid)).skipped == 1 - runs


async def test_pause_and_resume(instance: AsyncTaskScheduler) -> None:
    sid, _start = await add_due(instance)
    assert await instance.pause_schedule(sid) is ScheduleState.PAUSED
    await instance.runner.cycle()
    assert await runs_of(queue_of(instance), sid) == []
    assert (await instance.get_schedule(sid)).next_run is None
    updated = await instance.update_schedule(sid, interval=1800)
    assert updated.state is ScheduleState.PAUSED  # an update keeps it paused
    assert await instance.resume_schedule(sid) is ScheduleState.ACTIVE
    info = await instance.get_schedule(sid)
    assert info.next_run is not None
    assert info.next_run > time.time() - 5


async def test_update_and_remove_take_effect_on_the_next_cycle(
    instance: AsyncTaskScheduler,
) -> None:
    moved, start = await add_due(instance)
    removed, _start = await add_due(instance)
    await instance.update_schedule(moved, start_at=start + timedelta(hours=1))
    await instance.remove_schedule(removed)
    await instance.runner.cycle()
    assert await queue_of(instance).pop() == []
    soon = datetime.now(timezone.utc) + timedelta(milliseconds=200)
    await instance.update_schedule(moved, start_at=soon, task={**TEMPLATE, "user_id": "carol"})
    await wait_server_time_past(queue_of(instance), soon.timestamp())
    await instance.runner.cycle()
    [task] = await queue_of(instance).pop()
    assert task.user_id == "carol"


# --- failures, health, stopping --------------------------------------------------------


def payload_refusing(server: Server, namespace: str, retries: int) -> AsyncTaskScheduler:
    """An instance that sets the namespace's payload limit to 100 bytes: no instance can
    submit a run with a 2 kB payload until the limit is raised again (see ``raise_limit``)."""
    config = FAST.model_copy(update={"max_submit_retries": retries})
    settings = QueueSettings(max_payload_bytes=100)
    return AsyncTaskScheduler(server.url, namespace, config=config, settings=settings)


async def raise_limit(instance: AsyncTaskScheduler) -> None:
    """Sets the namespace's payload limit back to its default (the settings live in the
    server: the last writer's apply to every client)."""
    namespace = instance.ops.namespace
    async with AsyncFairQueue(
        namespace=namespace.name, settings=QueueSettings(max_payload_bytes=1024 * 1024),
        executor=instance.executor,
    ) as queue:  # fmt: skip
        await queue.stats()  # its first call writes its settings


BIG = {**TEMPLATE, "args": ["x" * 2000]}


async def test_a_failed_submission_is_retried_with_backoff_for_the_same_run(
    server: Server, namespace: str, instance: AsyncTaskScheduler
) -> None:
    sid, start = await add_due(instance, task=BIG)
    refusing = payload_refusing(server, namespace, retries=3)
    await refusing.runner.cycle()
    await refusing.close()
    info = await instance.get_schedule(sid)
    assert info.failures == 1
    assert info.state is ScheduleState.ACTIVE
    assert info.last_error is not None
    assert "payload" in info.last_error
    assert info.next_run is not None
    assert info.next_run >= start.timestamp() + FAST.retry_backoff_base
    assert await queue_of(instance).pop() == []
    await raise_limit(instance)
    await wait_server_time_past(queue_of(instance), info.next_run)
    await instance.runner.cycle()
    [task] = await queue_of(instance).pop()
    assert task.task_id == f"{sid}@{round(start.timestamp() * 1e6)}"  # the run that failed
    info = await instance.get_schedule(sid)
    assert (info.failures, info.last_error, info.runs) == (0, None, 1)
    assert info.next_run == pytest.approx(start.timestamp() + 3600)


async def test_a_refused_run_does_not_hold_up_the_others_in_its_batch(
    server: Server, namespace: str, instance: AsyncTaskScheduler
) -> None:
    big, _start = await add_due(instance, task=BIG)
    healthy, _start = await add_due(instance)
    refusing = payload_refusing(server, namespace, retries=3)
    await refusing.runner.cycle()  # both in one batch
    await refusing.close()
    [task] = await queue_of(instance).pop()
    assert task.task_id.startswith(healthy)
    info = await instance.get_schedule(big)
    assert (info.failures, info.runs, info.state) == (1, 0, ScheduleState.ACTIVE)
    assert info.last_error is not None
    assert "payload" in info.last_error
    assert (refusing.metrics.submitted, refusing.metrics.failed) == (1, 1)
    queue = queue_of(instance)
    assert await queue.redis.exists(lock_of(queue, big), lock_of(queue, healthy)) == 0


async def test_submissions_failing_past_the_maximum_fail_the_schedule(
    server: Server, namespace: str, instance: AsyncTaskScheduler
) -> None:
    sid, _start = await add_due(instance, task=BIG)
    refusing = payload_refusing(server, namespace, retries=2)

    async def failed() -> bool:
        await refusing.runner.cycle()
        return (await refusing.get_schedule(sid)).state is ScheduleState.FAILED

    await until(failed, timeout=10)
    info = await refusing.get_schedule(sid)
    assert info.failures == 3
    assert info.next_run is None
    assert refusing.metrics.failed == 3
    health = await refusing.health_check()
    assert health.status is HealthStatus.ERROR  # every recent submission failed
    assert any("failed" in problem for problem in health.problems)
    assert health.details["failed_schedules"] == [sid]
    await refusing.close()
    assert (await instance.health_check()).status is HealthStatus.WARNING  # a failed schedule
    assert await instance.resume_schedule(sid) is ScheduleState.ACTIVE
    info = await instance.get_schedule(sid)
    assert (info.state, info.failures, info.last_error) == (ScheduleState.ACTIVE, 0, None)
    assert info.next_run is not None


async def test_an_unreadable_definition_fails_its_schedule_not_the_instance(
    server: Server, namespace: str, instance: AsyncTaskScheduler
) -> None:
    broken, _start = await add_due(instance)
    healthy, _start = await add_due(instance)
    schedules, statuses = (instance.ops.namespace.key(n) for n in ("schedules", "schedules:status"))
    await queue_of(instance).redis.hset(schedules, broken, b"\xc1")  # not MessagePack
    config = FAST.model_copy(update={"max_submit_retries": 0})
    other = AsyncTaskScheduler(server.url, namespace, config=config)
    await other.runner.cycle()
    await other.close()
    [task] = await queue_of(instance).pop()
    assert task.task_id.startswith(healthy)
    packed = await queue_of(instance).redis.hget(statuses, broken)
    assert isinstance(packed, bytes)
    status = msgspec.msgpack.decode(packed)
    assert status["state"] == "failed"
    assert "unreadable" in status["last_error"]


async def test_health_is_ok_while_running_and_stale_cycles_are_reported(
    instance: AsyncTaskScheduler,
) -> None:
    health = await instance.health_check()
    assert health.status is HealthStatus.OK
    assert health.details["running"] is False
    run = asyncio.create_task(instance.run())

    async def cycled() -> bool:
        return instance.metrics.cycles > 0

    await until(cycled)
    assert (await instance.health_check()).status is HealthStatus.OK
    assert instance.metrics.last_cycle is not None
    instance.stop()
    await run
    # A running instance whose last cycle is old is unhealthy.
    metrics = instance.metrics
    metrics.running = True
    metrics.last_cycle = time.monotonic() - 10 * FAST.poll_interval
    assert (await instance.health_check()).status is HealthStatus.WARNING
    metrics.last_cycle = time.monotonic() - 100 * FAST.poll_interval
    assert (await instance.health_check()).status is HealthStatus.ERROR
    metrics.running = False


async def test_an_unreachable_server_is_an_error_and_the_loop_reconnects(namespace: str) -> None:
    with LocalServer(appendonly=True) as own:
        instance = AsyncTaskScheduler(own.url, namespace, config=FAST)
        sid = await instance.add_schedule(interval=0.1, task=TEMPLATE)
        run = asyncio.create_task(instance.run())

        async def cycled() -> bool:
            return instance.metrics.cycles > 0

        await until(cycled)  # past the check at start
        own.stop()

        async def outage() -> bool:
            return instance.metrics.outages > 0

        await until(outage)
        assert (await instance.health_check()).status is HealthStatus.ERROR
        own.start()

        async def submitting() -> bool:
            return (await instance.get_schedule(sid)).runs > 0

        await until(submitting, timeout=20)
        instance.stop()
        await run
        await instance.close()


async def test_a_stopped_instance_is_recorded(
    server: Server, namespace: str, instance: AsyncTaskScheduler
) -> None:
    run = asyncio.create_task(instance.run())

    async def cycled() -> bool:
        return instance.metrics.cycles > 0

    await until(cycled)
    instance.stop()
    await run
    with TaskScheduler(server.url, namespace) as reader:
        records = reader.instances()
    [record] = records.values()
    assert record["state"] == "stopped"
    assert record["cycles"] >= 1


# --- health from outside, instances, lifecycle -------------------------------------------

QUICK = SchedulerConfig(poll_interval=0.05, lock_timeout=5, instance_ttl=2.0)


async def test_health_is_judged_from_the_instances_records(
    server: Server, namespace: str, instance: AsyncTaskScheduler
) -> None:
    """An observer that runs no instance (like ``fairque scheduler health``) sees whether
    a live instance serves the active schedules, and which instance was killed."""
    start = datetime.now(timezone.utc) + timedelta(hours=1)
    await instance.add_schedule(interval=3600, start_at=start, task=TEMPLATE)
    health = await instance.health_check()
    assert health.status is HealthStatus.ERROR
    assert health.problems == (
        "1 active schedule(s) and no live scheduler instance: no runs are being submitted",
    )
    live = AsyncTaskScheduler(server.url, namespace, config=QUICK.model_copy(
        update={"instance_id": "live"}))  # fmt: skip
    run = asyncio.create_task(live.run())

    async def status_is(status: HealthStatus) -> bool:
        return (await instance.health_check()).status is status

    await until(lambda: status_is(HealthStatus.OK))
    assert (await instance.health_check()).details["live_instances"] == ["live"]
    # One cycle and never another, nor a stop record: as if it was killed.
    killed = AsyncTaskScheduler(server.url, namespace, config=QUICK.model_copy(
        update={"instance_id": "killed"}))  # fmt: skip
    await killed.runner.cycle()
    await killed.close()
    assert (await instance.instances())["killed"]["live"] is True
    await until(lambda: status_is(HealthStatus.WARNING))
    health = await instance.health_check()
    assert health.details["stale_instances"] == ["killed"]
    [problem] = health.problems
    assert problem.startswith("instance killed stopped beating")
    records = await instance.instances()
    assert (records["killed"]["state"], records["killed"]["live"]) == ("stale", False)
    assert records["live"]["state"] == "running"

    async def dropped() -> bool:  # after instance_ttl, by the scripts
        return "killed" not in await instance.instances()

    await until(dropped)
    assert (await instance.health_check()).status is HealthStatus.OK
    assert await live.shutdown(timeout=10)
    await run
    await live.close()
    records = await instance.instances()
    assert (records["live"]["state"], records["live"]["live"]) == ("stopped", False)
    assert (await instance.health_check()).status is HealthStatus.ERROR  # none live now


def test_the_blocking_scheduler_runs_in_a_thread_and_stops_from_another(
    server: Server, namespace: str, scheduler: TaskScheduler
) -> None:
    queue = sync_queue_of(scheduler)
    sid = scheduler.add_schedule(interval=0.1, task=TEMPLATE)
    runner = TaskScheduler(server.url, namespace, config=FAST)
    thread = threading.Thread(target=runner.run)  # handle_signals=True: not in a thread
    thread.start()
    wait_for(lambda: scheduler.get_schedule(sid).runs >= 2)
    assert runner.shutdown(timeout=10)
    thread.join(timeout=10)
    assert not thread.is_alive()
    [record] = scheduler.instances().values()
    assert record["state"] == "stopped"
    assert queue.stats().counters["pushed"] == scheduler.get_schedule(sid).runs
    # A stop asked before run() begins is not missed: that run returns at once.
    runner.stop()
    late = threading.Thread(target=runner.run)
    late.start()
    late.join(timeout=10)
    assert not late.is_alive()
    assert runner.shutdown(timeout=0)  # nothing runs
    runner.close()


def test_run_refuses_an_unreachable_server_naming_it(namespace: str) -> None:
    port = free_port()
    with TaskScheduler(f"redis://127.0.0.1:{port}", namespace, config=FAST) as scheduler:
        with pytest.raises(FairQueueError, match=f"cannot reach the server at 127.0.0.1:{port}"):
            scheduler.run()
        health = scheduler.health_check()
    assert health.status is HealthStatus.ERROR
    assert health.problems == (f"the server at 127.0.0.1:{port} does not answer",)


async def test_async_run_refuses_an_unreachable_server_naming_it(namespace: str) -> None:
    port = free_port()
    instance = AsyncTaskScheduler(f"redis://127.0.0.1:{port}", namespace, config=FAST)
    with pytest.raises(FairQueueError, match=f"cannot reach the server at 127.0.0.1:{port}"):
        await instance.run()
    assert await instance.shutdown(timeout=0)  # it is not running
    await instance.close()
