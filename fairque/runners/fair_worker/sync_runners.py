"""How a worker runs sync task functions: on threads (default) or in task processes.

A sync function cannot be interrupted in a thread, so the two differ in what a timeout
or a shutdown does to a run that goes on, and both make sure a task never runs twice at
once:

- ``thread``: a run past its timeout keeps its slot and its lease (the worker's heartbeat
  extends it) until its thread returns; only then is the timeout recorded, so the retry
  cannot start while the first run goes on. At shutdown, a task whose thread still runs
  after the grace period is not handed back: its lease expires once the process is gone
  (the threads are daemon threads, so they do not hold the process up).
- ``process``: each run goes to a long-lived task process
  (:mod:`fairque.runners.fair_worker.child`), which imported the same functions itself.
  At the timeout, or at shutdown after the grace period, the process is killed, so the
  run really ends before the task is failed or handed back, and a new process replaces
  it. Nothing is pickled: a run is sent as the function's name and the MessagePack
  payload, and its result comes back as MessagePack.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol, TypeVar

import msgspec

from fairque.engine.records import ErrorReport
from fairque.engine.waiting import within
from fairque.errors import InvalidInput
from fairque.queue.models import LeasedTask
from fairque.runners.fair_worker.child import (
    HEADER,
    MAX_FRAME,
    Hello,
    Ready,
    Run,
    RunEnded,
    frame,
    resolve,
)
from fairque.runners.fair_worker.config import WorkerConfig
from fairque.runners.fair_worker.functions import Registry, TaskFunction
from fairque.runners.fair_worker.sync_context import SyncTaskContext

T = TypeVar("T")
log = logging.getLogger("fairque.worker")

START_SECONDS = 60.0  # a task process that has not loaded the functions by then is broken
CLOSE_SECONDS = 5.0  # an idle task process told to end is killed after this long


class RunFailed(Exception):  # noqa: N818 - reads as "raise RunFailed(...)"
    """A run in a task process failed: ``message`` is the error to record, ``report``
    all that is known of it (the exception's type and traceback, when one raised)."""

    def __init__(self, message: str, retry: bool = True, report: ErrorReport | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry = retry
        self.report = ErrorReport(message) if report is None else report


class SyncRunner(Protocol):
    """Runs the sync functions of a worker (its event loop calls every method)."""

    async def start(self) -> None:
        """Prepares to run; raises :class:`InvalidInput` if the functions cannot run."""

    async def call(self, leased: LeasedTask, function: TaskFunction, args: list[Any],
                   kwargs: dict[str, Any], timeout: float) -> Any:  # fmt: skip
        """The function's result; raises its error, :class:`RunFailed`, or
        ``asyncio.TimeoutError`` once the run has really ended."""

    def unstoppable(self) -> set[str]:
        """Ids of the tasks whose runs go on and cannot be stopped."""

    async def close(self) -> None:
        """Releases what it holds (after the worker's last run was cancelled or ended)."""


class DaemonThreads:
    """A thread pool of daemon threads.

    ``ThreadPoolExecutor`` joins its threads at interpreter exit, so a function that never
    returns would keep a stopped worker's process alive; these threads end with it.
    """

    def __init__(self, size: int, prefix: str) -> None:
        self._size = size
        self._prefix = prefix
        self._work: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]] | None] = (
            queue.SimpleQueue()
        )
        self._threads: list[threading.Thread] = []
        self._idle = threading.Semaphore(0)
        self._closed = False

    def submit(self, call: Callable[[], T]) -> Future[T]:
        """Runs ``call`` on a thread of the pool; its future."""
        if self._closed:
            raise RuntimeError("the thread pool is shut down")
        future: Future[T] = Future()
        self._work.put((future, call))
        if not self._idle.acquire(blocking=False) and len(self._threads) < self._size:
            name = f"{self._prefix}-{len(self._threads)}"
            thread = threading.Thread(target=self._serve, name=name, daemon=True)
            self._threads.append(thread)
            thread.start()
        return future

    def _serve(self) -> None:
        while (item := self._work.get()) is not None:
            future, call = item
            if future.set_running_or_notify_cancel():
                try:
                    result = call()
                except BaseException as exc:  # the caller gets it, whatever it is
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            del item, future, call  # nothing of a finished run is kept while idle
            self._idle.release()

    def shutdown(self) -> None:
        """Cancels what has not started and lets idle threads end (running ones run on)."""
        self._closed = True
        with contextlib.suppress(queue.Empty):
            while (item := self._work.get_nowait()) is not None:
                item[0].cancel()
        for _ in self._threads:
            self._work.put(None)


class ThreadRunner:
    """Sync functions on daemon threads; a run past its timeout is waited for."""

    def __init__(self, size: int, contexts: Callable[[LeasedTask], SyncTaskContext]) -> None:
        self._threads = DaemonThreads(size, "fairque-task")
        self._contexts = contexts
        # Runs whose threads have not returned, by task id (two, if a task whose lease was
        # lost came back to this worker while its first run went on).
        self._running: dict[str, int] = {}

    async def start(self) -> None:
        """Threads need nothing prepared."""

    async def call(self, leased: LeasedTask, function: TaskFunction, args: list[Any],
                   kwargs: dict[str, Any], timeout: float) -> Any:  # fmt: skip
        if function.wants_context:
            kwargs["context"] = self._contexts(leased)
        ended = self._submit(leased.task_id, functools.partial(function.func, *args, **kwargs))
        try:
            # Shielded: a timeout or a cancelled job must not look like the end of the run.
            return await within(asyncio.shield(ended), timeout)
        except asyncio.TimeoutError:
            log.warning("task %s: past its timeout of %g s; a thread cannot be stopped, so "
                        "it keeps its lease until the function returns", leased.task_id,
                        timeout, extra=leased.log_fields())  # fmt: skip
            await asyncio.wait([ended])
            raise

    def _submit(self, task_id: str, call: Callable[[], Any]) -> asyncio.Future[Any]:
        """Starts ``call`` on a thread; the future ends when the thread returns (whatever
        happens to the task's job meanwhile)."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[Any] = loop.create_future()
        self._running[task_id] = self._running.get(task_id, 0) + 1

        def settle(future: Future[Any]) -> None:  # on the event loop
            if self._running[task_id] == 1:
                del self._running[task_id]
            else:
                self._running[task_id] -= 1
            if ended.done():
                return
            if future.cancelled():
                ended.cancel()
            elif (error := future.exception()) is not None:
                ended.set_exception(error)
            else:
                ended.set_result(future.result())

        def returned(future: Future[Any]) -> None:  # on the thread
            with contextlib.suppress(RuntimeError):  # the loop is closed: the worker ended
                loop.call_soon_threadsafe(settle, future)

        # In a copy of the event loop's context: what a hook set around the run (a span,
        # a logging context) reaches the function, as asyncio.to_thread does.
        self._threads.submit(
            functools.partial(contextvars.copy_context().run, call)
        ).add_done_callback(returned)
        # Retrieved here, so an error of a run nobody waits for any more is not reported
        # as "never retrieved".
        ended.add_done_callback(lambda done: done.cancelled() or done.exception())
        return ended

    def unstoppable(self) -> set[str]:
        return set(self._running)

    async def close(self) -> None:
        self._threads.shutdown()


class _Process:
    """One task process and its socket."""

    def __init__(
        self, process: asyncio.subprocess.Process, reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:  # fmt: skip
        self.process = process
        self.reader = reader
        self.writer = writer

    async def exchange(self, body: bytes) -> bytes:
        """Sends one frame and reads the answer; :class:`RunFailed` if the process ends."""
        try:
            self.writer.write(frame(body))
            await self.writer.drain()
            return await self._read()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            code = await self.process.wait()
            raise RunFailed(f"the task process ended (exit code {code})") from None

    async def _read(self) -> bytes:
        (length,) = HEADER.unpack(await self.reader.readexactly(HEADER.size))
        if length > MAX_FRAME:
            raise ValueError(f"frame of {length} bytes")
        return await self.reader.readexactly(length)

    async def end(self) -> None:
        """Closes the socket, which ends the process; kills it if it does not end."""
        self.writer.close()
        try:
            await within(self.process.wait(), CLOSE_SECONDS)
        except asyncio.TimeoutError:
            self.kill()
            await self.process.wait()

    def kill(self) -> None:
        """Kills the process and what it started (its own process group), at once."""
        _kill_group(self.process)
        self.writer.close()


def _kill_group(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:  # not reaped yet, so its group id is still its own
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def _importable(function: TaskFunction) -> tuple[str, str]:
    """Where a task process finds ``function``: (module, qualified name). Refuses one it
    could not find by name (defined inside a function, or in an interactive session)."""
    func = function.func
    module, qualname = func.__module__, func.__qualname__
    main = vars(sys.modules["__main__"]) if module == "__main__" else None
    found: object
    try:
        found = resolve(module, qualname, main)
    except Exception as exc:
        found = exc
    if found is not func or (module == "__main__" and not _main_path()):
        raise InvalidInput("sync_runner", f"process: function {function.name!r} "
                           f"({module}.{qualname}) cannot be imported by name in a task "
                           "process; define it at the top level of a module")  # fmt: skip
    return module, qualname


def _main_path() -> str | None:
    path = getattr(sys.modules["__main__"], "__file__", None)
    return None if path is None else os.path.abspath(path)


class ProcessRunner:
    """Sync functions in long-lived task processes, one run at a time each; a run past its
    timeout is killed with its process."""

    def __init__(self, functions: Registry, config: WorkerConfig) -> None:
        self._functions = functions
        self._config = config
        self._size = config.concurrency
        self._hello = b""
        self._idle: list[_Process] = []
        self._busy = 0
        self._exits: set[asyncio.Task[Any]] = set()  # killed processes being reaped
        self._spares: set[asyncio.Task[None]] = set()  # replacements being started
        self._closing = False

    async def start(self) -> None:
        """Checks that every sync function can be found by name, and starts one task
        process, which must load them all (else :class:`InvalidInput`, naming why)."""
        found = {
            name: _importable(function)
            for name, function in self._functions.functions.items()
            if not function.is_async
        }
        if not found:
            return  # async functions only: they run on the event loop
        config = self._config
        hello = Hello(found, _main_path(), config.redis_url, config.namespace, config.shards)
        self._hello = msgspec.msgpack.encode(hello)
        try:
            self._idle.append(await self._spawn())
        except RunFailed as exc:
            raise InvalidInput("sync_runner", f"process: {exc.message}") from None

    async def _spawn(self) -> _Process:
        """A new task process that has loaded the functions."""
        ours, theirs = socket.socketpair()
        # The task process imports what this one can: the same modules, found the same way.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        code = (
            "import sys; from fairque.runners.fair_worker.child import main; "
            "sys.exit(main(sys.argv[1:]))"
        )
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-c", code, str(theirs.fileno()), str(os.getpid()),
                stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),), env=env,
                start_new_session=True,  # its own group: killed with what it starts
            )  # fmt: skip
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        child = None
        try:
            reader, writer = await asyncio.open_unix_connection(sock=ours)
            child = _Process(process, reader, writer)
            answer = await within(child.exchange(self._hello), START_SECONDS)
            ready = msgspec.msgpack.decode(answer, type=Ready)
        except BaseException as exc:  # cancelled too: the process must not outlive this
            _kill_group(process)
            if child is None:
                ours.close()
            else:
                child.writer.close()
            self._reap(process)
            if isinstance(exc, asyncio.TimeoutError):
                message = f"a task process did not start within {START_SECONDS:g} s"
                raise RunFailed(message) from None
            raise
        if ready.error is not None:
            child.kill()
            self._reap(process)
            raise RunFailed(f"a task process could not load the functions: {ready.error}")
        return child

    async def call(self, leased: LeasedTask, function: TaskFunction, args: list[Any],
                   kwargs: dict[str, Any], timeout: float) -> Any:  # fmt: skip
        # The process computes the arguments from the payload itself (checked already).
        del args, kwargs
        request = msgspec.msgpack.encode(Run(leased, function.wants_context))
        self._busy += 1
        try:
            child = self._idle.pop() if self._idle else await self._spawn()
            try:
                reply = await within(child.exchange(request), timeout)
            except asyncio.TimeoutError:
                log.warning("task %s: past its timeout of %g s; killing its task process",
                            leased.task_id, timeout, extra=leased.log_fields())  # fmt: skip
                self._replace(child)
                raise
            except RunFailed:
                self._replace(child)
                raise
            except BaseException:  # cancelled (a stop, a lost lease): the run ends with it
                child.kill()
                self._reap(child.process)
                raise
        finally:
            self._busy -= 1
        self._idle.append(child)
        done = msgspec.msgpack.decode(reply, type=RunEnded)
        if done.error is not None:
            report = ErrorReport(done.error, done.error_type, done.traceback)
            raise RunFailed(done.error, done.retry, report)
        return done.result

    def _replace(self, child: _Process) -> None:
        """Kills ``child`` and starts another in the background, so the next run has a
        process ready."""
        child.kill()
        self._reap(child.process)
        # ``child`` still counts as busy: its run has not returned yet.
        if not self._closing and self._busy - 1 + len(self._idle) + len(self._spares) < self._size:
            spare = asyncio.ensure_future(self._spare())
            self._spares.add(spare)
            spare.add_done_callback(self._spares.discard)

    async def _spare(self) -> None:
        try:
            self._idle.append(await self._spawn())
        except RunFailed as exc:
            log.warning("cannot start a task process: %s", exc.message)

    def _reap(self, process: asyncio.subprocess.Process) -> None:
        """Collects the exit of a killed process in the background."""
        exit_code = asyncio.ensure_future(process.wait())
        self._exits.add(exit_code)
        exit_code.add_done_callback(self._exits.discard)

    def unstoppable(self) -> set[str]:
        return set()  # a task process can always be killed

    async def close(self) -> None:
        """Ends the idle task processes (they exit when their socket closes)."""
        self._closing = True
        for spare in self._spares:
            spare.cancel()  # _spawn kills a process it was starting
        await asyncio.gather(*self._spares, return_exceptions=True)
        idle, self._idle = self._idle, []
        await asyncio.gather(*(child.end() for child in idle))
        await asyncio.gather(*self._exits, return_exceptions=True)
