"""Why a task failed: each failed attempt keeps its time, worker, exception type, text and
a bounded traceback; a task keeps the last ERRORS_KEPT of them, whatever became of it."""

from __future__ import annotations

from collections.abc import Callable

from fairque import ErrorReport, FairQueue, QueueSettings, Task, TaskState
from fairque.engine.records import ERRORS_KEPT, MAX_TRACEBACK, MAX_TRACEBACK_FRAMES
from tests.conftest import wait_for


def fetch(queue: FairQueue, task_id: str) -> str:
    raise LookupError(f"no row for {task_id}")


def test_an_attempt_keeps_its_exception_and_an_expired_lease_its_worker(
    queue: FairQueue,
) -> None:
    task_id = queue.push(Task(user_id="u", payload="x"))
    [first] = queue.pop(worker_id="w1", lease_seconds=60)
    try:
        fetch(queue, task_id)
    except LookupError as exc:
        state = queue.fail(first, exc)
    assert state is TaskState.SCHEDULED
    wait_for(lambda: queue.pop(worker_id="w2", lease_seconds=0.05), timeout=5)
    wait_for(lambda: queue.reap().expired, timeout=5)
    [third] = wait_for(lambda: queue.pop(worker_id="w3"), timeout=5)
    queue.finish(third)
    info = queue.get(task_id)
    assert info is not None
    assert info.state is TaskState.FINISHED  # and it still tells why its attempts failed
    raised, expired = info.errors
    assert (raised.attempt, raised.worker_id, raised.type) == (1, "w1", "LookupError")
    assert raised.message == f"LookupError: no row for {task_id}"
    assert raised.traceback is not None
    assert raised.traceback.endswith(f'in fetch\n    raise LookupError(f"no row for {{task_id}}")\n'
                                     f"LookupError: no row for {task_id}\n")  # fmt: skip
    assert (expired.attempt, expired.worker_id, expired.message) == (2, "w2", "lease expired")
    assert (expired.type, expired.traceback) == (None, None)
    assert info.finished_at is not None
    assert info.created_at <= raised.at < expired.at <= info.finished_at


def test_a_task_keeps_its_last_attempts_with_their_tracebacks_cut(
    make_queue: Callable[..., FairQueue],
) -> None:
    queue = make_queue(QueueSettings(retry_backoff_base=0.001, retry_backoff_max=0.001))
    task_id = queue.push(Task(user_id="u", payload="x", max_retries=ERRORS_KEPT + 1))
    for attempt in range(1, ERRORS_KEPT + 3):
        [leased] = wait_for(queue.pop, timeout=5)
        huge = "é" * MAX_TRACEBACK + f"innermost frame of attempt {attempt}\n"
        queue.fail(leased, ErrorReport(f"boom {attempt}", "app.Boom", huge))
    info = queue.get(task_id)
    assert info is not None
    assert info.state is TaskState.FAILED
    assert [e.attempt for e in info.errors] == list(range(3, ERRORS_KEPT + 3))
    for error in info.errors:
        assert error.traceback is not None
        assert error.traceback.endswith(f"innermost frame of attempt {error.attempt}\n")
        assert MAX_TRACEBACK - 1 <= len(error.traceback.encode()) <= MAX_TRACEBACK


def test_a_report_keeps_the_innermost_frames() -> None:
    def deep(depth: int) -> None:
        if depth == 0:
            raise ValueError("at the bottom")
        if depth % 2:  # frames on two lines: Python shortens repeats of one
            deep(depth - 1)
        else:
            deep(depth - 1)

    try:
        deep(2 * MAX_TRACEBACK_FRAMES)
    except ValueError as exc:
        report = ErrorReport.of(exc)
    assert report.traceback.count("\n  File ") == MAX_TRACEBACK_FRAMES
    assert report.traceback.endswith(
        'raise ValueError("at the bottom")\nValueError: at the bottom\n'
    )
    assert report.type == "ValueError"
