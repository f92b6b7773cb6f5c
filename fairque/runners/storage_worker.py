"""Contract workers: job processors that take batches from numbered queues
and hand them, typed, to handlers (the Manager that moves them to backlog is
:mod:`fairque.runners.manager`).

A :class:`StorageWorker` runs ``max_processors`` job processors. Each takes up to its
queue's ``batch_size`` tasks, decodes them with the queue's contract and awaits the
queue's handler, which calls ``done_task`` / ``retry_task`` itself and returns
:class:`HandlerStats`. Then the processor moves on to the next queue (round robin), or
stays where the :class:`~fairque.runners.manager.Manager` put it. A stop lets every
current handler call finish.

Workers and the Manager talk only through the storage's server (the board of
:mod:`fairque.storage.plan`): every worker beats with a report of its queues and totals,
and takes its part of the plan from the reply; the Manager reads the live workers and
the queues' figures and publishes the plan. So a Manager steers workers in any process
on any host, a worker that dies drops out of the plan once its beat expires, and one
that starts joins it at the next round.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import msgspec
import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fairque.engine.observer import Observer
from fairque.engine.outage import OUTAGE, Backoff, OutageLog
from fairque.engine.waiting import wait_event
from fairque.errors import FairQueueError, InvalidInput, NewerDataFormat
from fairque.runners.manager import Manager
from fairque.storage.async_protocol import AsyncStorage
from fairque.storage.contract import Contract, QueueContract
from fairque.storage.models import (
    DEFAULT_VISIBILITY_TIMEOUT,
    MAX_COUNT,
    MAX_VISIBILITY_TIMEOUT,
    RetryInfo,
    StorageTask,
)
from fairque.storage.plan import MAX_TTL, QueueReport, WorkerReport, new_worker_id

log = logging.getLogger("fairque.storage")
# Errors a storage worker ends on: they come from this worker's code or data (a newer
# data format, input out of bounds), not from a state of the server that may pass.
REFUSALS = (NewerDataFormat, InvalidInput)
SLOW_CYCLE_SECONDS = 10.0  # seed 004: a cycle should end within 10 s (fast graceful stop)

UNDECODABLE_BACKOFF_MAX = 3600.0  # seconds: tasks the contract cannot read come back slowly


@dataclass
class HandlerStats:
    """What a handler did with a batch; also summed per queue by the worker."""

    processed: int = 0
    errors: int = 0
    retried: int = 0
    duration: float = 0.0  # seconds; the worker measures it when the handler leaves it 0
    last_error: str | None = None

    def add(self, other: HandlerStats) -> None:
        self.processed += other.processed
        self.errors += other.errors
        self.retried += other.retried
        self.duration += other.duration
        self.last_error = other.last_error or self.last_error

    @property
    def handled(self) -> int:
        return self.processed + self.errors + self.retried


class Handler(Protocol):
    """Handles a batch of one queue's typed tasks (``QueueContract.task_type``)."""

    async def __call__(self, storage: AsyncStorage, tasks: list[Any]) -> HandlerStats: ...


class QueueConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_size: int = Field(default=10, ge=1, le=MAX_COUNT)  # seed 004 default


class StorageWorkerConfig(BaseModel):
    """The storage worker's settings (``max_processors``, ``visibility_timeout``, per-queue
    ``batch_size``), plus how long to wait when every queue was empty, and how often the
    worker beats to the Manager's board (a worker silent for ``heartbeat_ttl`` seconds
    drops out of the plan)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_processors: int = Field(default=1, ge=1, le=1024)
    visibility_timeout: float = Field(
        default=DEFAULT_VISIBILITY_TIMEOUT, gt=0, le=MAX_VISIBILITY_TIMEOUT
    )
    idle_wait: float = Field(default=1.0, gt=0, le=60)
    slow_cycle: float = Field(default=SLOW_CYCLE_SECONDS, gt=0)  # cycles over this are counted
    queues: dict[int, QueueConfig] = Field(default_factory=dict)  # by queue number
    heartbeat: float = Field(default=2.0, gt=0, le=3600)
    heartbeat_ttl: float = Field(default=10.0, gt=0, le=MAX_TTL)

    @model_validator(mode="after")
    def _ttl_outlasts_beats(self) -> StorageWorkerConfig:
        if self.heartbeat_ttl <= self.heartbeat:
            raise ValueError("heartbeat_ttl must be longer than heartbeat")
        return self

    @classmethod
    def load(cls, path: str | Path) -> StorageWorkerConfig:
        """Reads a YAML file of these settings."""
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
            return cls.model_validate(data or {})
        except OSError as exc:
            raise InvalidInput("config", f"cannot read {path}: {exc.strerror}") from None
        except yaml.YAMLError as exc:
            raise InvalidInput("config", f"not valid YAML: {exc}") from None
        except pydantic.ValidationError as exc:
            raise InvalidInput.from_errors(exc.errors()) from None

    def batch_size(self, queue_num: int) -> int:
        return self.queues.get(queue_num, QueueConfig()).batch_size


class StorageWorker:
    """Runs job processors over the queues that have a handler.

    >>> worker = StorageWorker(storage, contract, {"emails": handle_emails})  # doctest: +SKIP
    >>> await worker.run()  # until worker.stop()  # doctest: +SKIP
    """

    def __init__(
        self,
        storage: AsyncStorage,
        contract: Contract,
        handlers: Mapping[int | str, Handler],
        config: StorageWorkerConfig | None = None,
        metrics: Observer | None = None,
        *,
        worker_id: str | None = None,
    ) -> None:
        if not handlers:
            raise InvalidInput("handlers", "give a handler for at least one queue")
        self.storage = storage
        self.config = config or StorageWorkerConfig()
        self.metrics = metrics
        self._handlers = {contract.queue(key).id: handler for key, handler in handlers.items()}
        self.queues: list[QueueContract] = sorted(
            (contract.queue(queue_num) for queue_num in self._handlers), key=lambda q: q.id
        )
        self.stats = {queue.id: HandlerStats() for queue in self.queues}  # summed per queue
        self.slow_cycles = 0  # cycles longer than config.slow_cycle
        self.outages = 0  # times the storage was found unreachable
        self._outage = OutageLog(log, "of the storage", "processors wait for it")
        self.server_errors = 0  # calls the storage's server refused (full, read-only, ...)
        self._plan: list[int] = []  # the Manager's queue for processor i, if it gave one
        self._stopping = asyncio.Event()
        self.worker_id = worker_id or new_worker_id()  # its name on the Manager's board

    def assign(self, plan: Sequence[int]) -> None:
        """Pins processor i to queue ``plan[i]`` from its next cycle on; processors past
        the end of ``plan`` go round robin. ``[]`` puts every processor back on round robin."""
        unknown = sorted(set(plan) - set(self._handlers))
        if unknown:
            raise InvalidInput("plan", f"no handler for queue {', '.join(map(str, unknown))}")
        self._plan = list(plan)

    @property
    def plan(self) -> list[int]:
        """The queue each processor is pinned to ([]: round robin)."""
        return list(self._plan)

    def report(self) -> WorkerReport:
        """What this worker tells the Manager at each beat."""
        queues = {
            queue.id: QueueReport(
                self.config.batch_size(queue.id),
                self.stats[queue.id].handled,
                self.stats[queue.id].duration,
            )
            for queue in self.queues
        }
        return WorkerReport(
            self.worker_id,
            self.config.max_processors,
            queues,
            self.plan,
            socket.gethostname(),
            os.getpid(),
        )

    def stop(self) -> None:
        """Processors finish their current handler call, then end."""
        self._stopping.set()

    async def run(self) -> None:
        """Runs the processors, and the beats to the Manager's board, until :meth:`stop`
        (a stop that comes before the run started ends it at once)."""
        if self.metrics:
            self.metrics.observe_running("workers", 1)
        try:
            count = self.config.max_processors
            processors = (self._processor(index) for index in range(count))
            await asyncio.gather(self._beats(), *processors)
        finally:
            self._stopping.clear()  # the worker may run again
            if self.metrics:
                self.metrics.observe_running("workers", -1)

    async def _beats(self) -> None:
        """Beats every ``heartbeat`` seconds and follows the plan the reply carries; no
        plan means no instruction, so the processors go on as they were."""
        backoff = Backoff()
        while not self._stopping.is_set():
            try:
                plan = await self.storage.beat(self.report(), self.config.heartbeat_ttl)
            except REFUSALS:
                raise
            except (*OUTAGE, FairQueueError):
                await wait_event(self._stopping, backoff.next())  # the processors log it
                continue
            backoff.reset()
            if plan is not None and plan != self._plan:
                try:
                    self.assign(plan[: self.config.max_processors])
                except InvalidInput as exc:  # a plan made for another contract: not ours
                    log.warning("worker %s: ignoring the plan %s (%s)", self.worker_id, plan, exc)
                else:
                    log.info("worker %s: following the plan %s", self.worker_id, plan)
            await wait_event(self._stopping, self.config.heartbeat)

    def _pinned(self, index: int) -> int | None:
        return self._plan[index] if index < len(self._plan) else None

    async def _processor(self, index: int) -> None:
        if self.metrics:
            self.metrics.observe_running("job_processors", 1)
        turn = index  # processors start on different queues
        empty = 0  # empty takes in a row
        backoff = Backoff()
        try:
            while not self._stopping.is_set():
                pinned = self._pinned(index)
                if pinned is None:
                    queue = self.queues[turn % len(self.queues)]
                    turn += 1
                else:
                    queue = next(q for q in self.queues if q.id == pinned)
                try:
                    took = await self._cycle(queue)
                except OUTAGE as exc:
                    self.outages += 1
                    self._outage.failed(exc)
                    await wait_event(self._stopping, backoff.next())
                    continue
                except REFUSALS:
                    raise  # this code or this data: waiting changes nothing
                except FairQueueError as exc:  # full, read-only, ...: it may pass
                    self.server_errors += 1
                    log.warning("queue %s: the storage failed (%s); trying again", queue.name, exc)
                    await wait_event(self._stopping, backoff.next())
                    continue
                backoff.reset()
                self._outage.answered()
                empty = 0 if took else empty + 1
                if empty and (pinned is not None or empty >= len(self.queues)):
                    empty = 0
                    await wait_event(self._stopping, self.config.idle_wait)
        finally:
            if self.metrics:
                self.metrics.observe_running("job_processors", -1)

    async def _cycle(self, queue: QueueContract) -> bool:
        """Takes one batch of ``queue`` and handles it; False when there was none."""
        started = time.monotonic()
        batch = self.config.batch_size(queue.id)
        tasks = await self.storage.get_task(queue.id, batch, self.config.visibility_timeout)
        if not tasks:
            return False
        stats = await self._handle(queue, tasks)
        self.stats[queue.id].add(stats)
        elapsed = time.monotonic() - started
        slow = elapsed > self.config.slow_cycle
        if slow:
            self.slow_cycles += 1
            log.warning("queue %s: a cycle took %.1f s", queue.name, elapsed)
        if self.metrics:
            self.metrics.observe_cycle(queue.id, elapsed, slow)
            for outcome in ("processed", "errors", "retried"):
                count = getattr(stats, outcome)
                if count:
                    self.metrics.observe_handled(queue.id, outcome, count)
        return True

    async def _handle(self, queue: QueueContract, tasks: list[StorageTask]) -> HandlerStats:
        decoded = [(task, _decode(queue, task)) for task in tasks]
        typed = [value for _, value in decoded if value is not None]
        unreadable = [task for task, value in decoded if value is None]
        stats = HandlerStats()
        if unreadable:
            # Not lost (a corrected contract may read it), and not taken again at once.
            await self.storage.retry_task([_backoff(task) for task in unreadable])
            stats.errors, stats.last_error = len(unreadable), "data does not match the contract"
        if not typed:
            return stats
        if self.metrics:
            self.metrics.observe_in_progress(queue.id, len(typed))
        started = time.monotonic()
        try:
            handled = await self._handlers[queue.id](self.storage, typed)
        except Exception as exc:  # the batch returns after its visibility timeout
            log.exception("queue %s: handler failed", queue.name)
            handled = HandlerStats(errors=len(typed), last_error=f"{type(exc).__name__}: {exc}")
        finally:
            if self.metrics:
                self.metrics.observe_in_progress(queue.id, -len(typed))
        if not isinstance(handled, HandlerStats):
            returned = type(handled).__name__
            log.error("queue %s: the handler returned %s, not HandlerStats", queue.name, returned)
            handled = HandlerStats(errors=len(typed), last_error=f"handler returned {returned}")
        if not handled.duration:
            handled.duration = time.monotonic() - started
        stats.add(handled)
        return stats


def _decode(queue: QueueContract, task: StorageTask) -> Any:
    """The typed task, or None (logged) when its data does not match the contract."""
    try:
        return queue.decode(task)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        log.warning("queue %s: task %d does not match the contract: %s", queue.name, task.id, exc)
        return None


def _backoff(task: StorageTask) -> RetryInfo:
    return RetryInfo.after(task.id, min(2.0**task.attempts, UNDECODABLE_BACKOFF_MAX))


async def serve(
    storage: AsyncStorage,
    contract: Contract,
    handlers: Mapping[int | str, Handler],
    config: StorageWorkerConfig,
    *,
    metrics: Observer | None = None,
    manager_interval: float | None = None,
    worker_id: str | None = None,
) -> StorageWorker:
    """Runs a worker, and a :class:`Manager` every ``manager_interval`` seconds if given,
    until SIGTERM / SIGINT; returns the worker (its stats) once every handler call ended."""
    worker = StorageWorker(storage, contract, handlers, config, metrics, worker_id=worker_id)
    manager = Manager(storage, manager_interval) if manager_interval else None

    def stop() -> None:
        worker.stop()
        if manager:
            manager.stop()

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop)
    await asyncio.gather(worker.run(), *([manager.run()] if manager else []))
    return worker
