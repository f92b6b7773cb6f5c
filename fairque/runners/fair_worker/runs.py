"""A worker's runs: each leased task's function runs as an asyncio task, an async one on
the loop and a sync one on a thread or in a task process (``sync_runner``, see
:mod:`fairque.runners.fair_worker.sync_runners`), under its timeout. A success waits in
the acknowledgements, a failure is recorded at once. A run whose task must not go on
(canceled, its lease lost) is stopped; at the worker's stop, runs get ``grace_seconds``,
then what still runs is handed back.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from fairque.engine.observer import Observer
from fairque.engine.outage import OUTAGE, OutageLog
from fairque.engine.records import ErrorReport, TaskState
from fairque.errors import InvalidInput, LeaseLost
from fairque.queue.async_client import AsyncQueue
from fairque.queue.client import Queue, open_queue
from fairque.queue.models import LeasedTask
from fairque.runners.fair_worker.acks import Acknowledgements
from fairque.runners.fair_worker.config import WorkerConfig
from fairque.runners.fair_worker.context import TaskContext
from fairque.runners.fair_worker.counts import Counts
from fairque.runners.fair_worker.functions import Registry, call_arguments
from fairque.runners.fair_worker.hooks import WorkerHooks
from fairque.runners.fair_worker.sync_context import SyncTaskContext
from fairque.runners.fair_worker.sync_runners import (
    ProcessRunner,
    RunFailed,
    SyncRunner,
    ThreadRunner,
)

log = logging.getLogger("fairque.worker")
T = TypeVar("T")


@dataclass(frozen=True)
class Outcome:
    """How one attempt ended: a result, or an error and whether to retry; or stopped by
    the worker (canceled, or its lease lost: nothing to record)."""

    result: Any = None
    error: ErrorReport | None = None
    retry: bool = True
    stopped: bool = False


@dataclass
class RunningTask:
    """A task this worker runs: its lease, the asyncio task of its run, the flag set when
    the run must stop (what ``context.cancelled`` reads) and why."""

    leased: LeasedTask
    job: asyncio.Task[None]
    cancel_event: threading.Event
    stopped_because: str = ""  # "canceled" or "lease lost", once stopped


class Runs:
    """The runs of one worker's leased tasks."""

    def __init__(  # noqa: PLR0917 - the worker's parts a run reaches
        self,
        config: WorkerConfig,
        functions: Registry,
        hooks: WorkerHooks,
        metrics: Observer | None,
        acks: Acknowledgements,
        counts: Counts,
        outage: OutageLog,
        stopping: asyncio.Event,
        now: asyncio.Event,
        look_again: asyncio.Event,
    ) -> None:
        self.config = config
        self.functions = functions
        self.hooks = hooks
        self.metrics = metrics
        self.acks = acks
        self.counts = counts
        self.outage = outage
        self.stopping = stopping
        self.now = now  # stop without the grace period
        self.look_again = look_again  # set when a run ends: its slot is free
        self.running: dict[str, RunningTask] = {}
        self._timed_out: set[asyncio.Task[Any]] = set()  # runs cancelled by their timer
        self.sync: SyncRunner = (
            ProcessRunner(functions, config) if config.sync_runner == "process"
            else ThreadRunner(config.concurrency, self._sync_context)
        )  # fmt: skip
        self._sync_queue: Queue | None = None

    def close(self) -> None:
        """Closes the blocking client of sync functions' contexts, if one was opened."""
        if self._sync_queue is not None:
            self._sync_queue.close()

    def start(self, queue: AsyncQueue, leased: LeasedTask) -> None:
        job = asyncio.create_task(self._execute(queue, leased))
        self.running[leased.task_id] = RunningTask(leased, job, threading.Event())

        def done(_: asyncio.Task[None]) -> None:
            self.running.pop(leased.task_id, None)
            self.look_again.set()
            # The acknowledger wakes after the fetch loop: the pop for the slot freed here
            # takes the acknowledgement first (Fetcher's pops), if a pop is to go.
            self.acks.wake()

        job.add_done_callback(done)

    async def _execute(self, queue: AsyncQueue, leased: LeasedTask) -> None:
        started = time.perf_counter()
        try:
            around = self.hooks.around_run(leased)
        except Exception:
            log.exception("task %s: the around_run hook failed", leased.task_id,
                          extra=leased.log_fields())  # fmt: skip
            around = nullcontext()
        with around:
            outcome = await self._call(queue, self.running[leased.task_id])
        elapsed = time.perf_counter() - started
        if outcome.stopped:
            because = self.running[leased.task_id].stopped_because
            log.info("task %s: %s; its run stopped after %.3f s", leased.task_id, because,
                     elapsed, extra=leased.log_fields())  # fmt: skip
            if because == "canceled":
                self._hook(self.hooks.on_cancel, leased, elapsed)
            return
        if self.metrics:
            self.metrics.observe_task(leased.name, outcome.error is None, elapsed)
        if outcome.error is None:
            self._hook(self.hooks.on_success, leased, outcome.result, elapsed)
            self.acks.add(leased, outcome.result)  # the acknowledger wakes in done()
            return
        error = outcome.error
        log.warning("task %s failed: %s", leased.task_id, error.message, extra=leased.log_fields())
        try:
            state = await queue.fail(leased, error, retry=outcome.retry)
            self.counts.failed += 1
            ended = self.hooks.on_failure if state is TaskState.FAILED else self.hooks.on_retry
            self._hook(ended, leased, error.message, elapsed)
        except LeaseLost:
            log.warning("task %s: lease lost before its failure was recorded", leased.task_id,
                        extra=leased.log_fields())  # fmt: skip
        except OUTAGE as exc:
            self.outage.failed(exc)
            log.debug("task %s: its failure not recorded; it returns when its lease ends",
                      leased.task_id, extra=leased.log_fields())  # fmt: skip

    def _hook(self, hook: Callable[..., None], leased: LeasedTask, *args: Any) -> None:
        """Calls a hook; one that raises is logged and changes nothing for the task."""
        try:
            hook(leased, *args)
        except Exception:
            log.exception("task %s: the %s hook failed", leased.task_id, hook.__name__,
                          extra=leased.log_fields())  # fmt: skip

    async def _call(self, queue: AsyncQueue, run: RunningTask) -> Outcome:
        try:
            outcome = await self._outcome(queue, run)
        except asyncio.CancelledError:
            if not run.cancel_event.is_set() or self.stopping.is_set():
                raise  # a stop: the run is handed back
            if sys.version_info >= (3, 11):
                run.job.uncancel()  # the cancellation was the abort's, and is spent
            return Outcome(stopped=True)
        # A thread's run is not stopped: it ends when the function returns, and what it
        # returned is not wanted any more.
        return Outcome(stopped=True) if run.cancel_event.is_set() else outcome

    async def _outcome(self, queue: AsyncQueue, run: RunningTask) -> Outcome:
        leased = run.leased
        function = self.functions.get(leased.name)
        if function is None:
            return Outcome(error=ErrorReport(f"unknown task function {leased.name!r}"), retry=False)
        try:
            args, kwargs = call_arguments(leased.payload)
        except InvalidInput as exc:
            return Outcome(error=ErrorReport(str(exc)), retry=False)
        timeout = min(leased.timeout, self.config.task_timeout_seconds)
        try:
            if function.is_async:
                if function.wants_context:
                    kwargs["context"] = TaskContext(leased, queue, cancel_event=run.cancel_event)
                result = await self._within_timeout(function.func(*args, **kwargs), timeout)
            else:
                # Returns or raises only once the run has really ended (sync_runners).
                result = await self.sync.call(leased, function, args, kwargs, timeout)
        except asyncio.TimeoutError:
            return Outcome(error=ErrorReport(f"timed out after {timeout:g} s"))
        except RunFailed as exc:  # reported by a task process
            return Outcome(error=exc.report, retry=exc.retry)
        except Exception as exc:
            return Outcome(error=ErrorReport.of(exc))
        return Outcome(result=result)

    async def _within_timeout(self, run: Awaitable[T], seconds: float) -> T:
        """Awaits a task's coroutine, raising asyncio.TimeoutError once ``seconds`` have
        passed. ``asyncio.timeout`` does the same at ~3x the cost (a quarter of the
        worker's own CPU per task, profiled): here one timer cancels the run's asyncio
        task and marks it, which tells that cancellation from any other (a stop)."""
        job = asyncio.current_task()
        assert job is not None  # a worker's run is always its own asyncio task
        timer = asyncio.get_running_loop().call_later(seconds, self._time_out, job)
        try:
            return await run
        except asyncio.CancelledError:
            if job in self._timed_out:
                raise asyncio.TimeoutError from None
            raise
        finally:
            timer.cancel()
            if job in self._timed_out:  # also when the run swallowed the cancellation
                self._timed_out.discard(job)
                if sys.version_info >= (3, 11):
                    job.uncancel()  # the cancellation was this timer's, and is spent

    def _time_out(self, job: asyncio.Task[Any]) -> None:
        self._timed_out.add(job)
        job.cancel()

    def _sync_context(self, leased: LeasedTask) -> SyncTaskContext:
        cancel_event = self.running[leased.task_id].cancel_event
        return SyncTaskContext(leased, self._blocking_queue(), cancel_event=cancel_event)

    def _blocking_queue(self) -> Queue:
        """A blocking client for the contexts of sync functions (they run on threads)."""
        if self._sync_queue is None:
            config = self.config
            self._sync_queue = open_queue(config.redis_url, config.namespace, config.shards)
        return self._sync_queue

    def stop(self, run: RunningTask, because: str) -> None:
        """Stops a run whose task must not go on (canceled, or its lease lost): an async
        function is cancelled, a task process killed; a function on a thread cannot be
        stopped and sees ``context.cancelled``."""
        run.stopped_because = because
        run.cancel_event.set()
        function = self.functions.get(run.leased.name)
        on_thread = function is not None and not function.is_async
        if not (on_thread and isinstance(self.sync, ThreadRunner)):
            run.job.cancel()

    def abort(self, task_id: str) -> None:
        """Stops the run of a task canceled while it runs, if this worker runs it."""
        run = self.running.get(task_id)
        if run is None or run.cancel_event.is_set():
            return  # another worker's, or one that ended meanwhile
        log.info("task %s: canceled while it runs; stopping it", task_id,
                 extra=run.leased.log_fields())  # fmt: skip
        self.stop(run, "canceled")

    async def hand_back(self, queue: AsyncQueue) -> None:
        """After a stop: wait up to the grace period, then release what still runs, except
        runs that cannot be stopped (their leases expire once this process is gone)."""
        jobs = [run.job for run in self.running.values()]
        if jobs:
            log.info("stopping: waiting up to %g s for %d running task(s)",
                     self.config.grace_seconds, len(jobs))  # fmt: skip
        if jobs and self.config.grace_seconds > 0:
            await self._grace(jobs)
        left = list(self.running.values())
        for run in left:
            run.job.cancel()
        # Ended first: a cancelled job kills its task process, so the run is over before
        # its task is handed back.
        await asyncio.gather(*(run.job for run in left), return_exceptions=True)
        unstoppable = self.sync.unstoppable()
        back = [run.leased for run in left if run.leased.task_id not in unstoppable]
        if len(back) < len(left):
            log.warning("%d task(s) still run in threads that cannot be stopped: not handed "
                        "back; they return within %g s after this process ends (their "
                        "lease)", len(left) - len(back), self.config.lease_seconds)  # fmt: skip
        if back:
            try:
                lost = await queue.release(back)
                self.counts.handed_back = len(back) - len(lost)
                log.info("handed %d unfinished task(s) back", self.counts.handed_back)
            except OUTAGE:
                log.warning(
                    "server unreachable: %d task(s) return when their lease ends", len(back)
                )

    async def _grace(self, jobs: list[asyncio.Task[None]]) -> None:
        """Waits until ``jobs`` end, the grace period passes or a stop without grace."""
        ended = asyncio.ensure_future(asyncio.wait(jobs))
        now = asyncio.ensure_future(self.now.wait())
        await asyncio.wait([ended, now], timeout=self.config.grace_seconds,
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        for waiter in (ended, now):
            waiter.cancel()
        await asyncio.gather(ended, now, return_exceptions=True)
