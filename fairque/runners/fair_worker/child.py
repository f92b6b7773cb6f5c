"""A task process of a worker in ``sync_runner: process`` mode.

It runs sync task functions one at a time, as its worker asks, so that the worker can
kill a run that overruns its timeout (a thread cannot be stopped; a process can). The
worker (:class:`fairque.runners.fair_worker.sync_runners.ProcessRunner`) starts it as
``main([FD, PARENT_PID])`` in a new interpreter, FD being its end of a socket pair.

Every message is a frame: 4 bytes of big-endian length, then MessagePack (msgspec).
Nothing is pickled. The first frame (:class:`Hello`) names the functions, each by its
registered name with the module and qualified name that define it; the child imports
them itself and answers :class:`Ready`. Each later frame (:class:`Run`) carries one
leased task (its function's name and its payload) and is answered by :class:`RunEnded`
(the result, or the error). The end of the socket (the worker closed it) ends the child.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import importlib
import os
import runpy
import signal
import socket
import struct
import sys
from collections.abc import Callable
from typing import IO, Any

import msgspec

from fairque.engine.records import ErrorReport
from fairque.errors import InvalidInput
from fairque.queue.client import Queue
from fairque.queue.models import LeasedTask
from fairque.runners.fair_worker.functions import TaskFunction, call_arguments
from fairque.runners.fair_worker.sync_context import SyncTaskContext

HEADER = struct.Struct(">I")  # the length of the MessagePack body that follows
MAX_FRAME = 1 << 30  # a longer frame means the stream is out of step: stop
PR_SET_PDEATHSIG = 1  # Linux prctl(2)


class Hello(msgspec.Struct, frozen=True):
    """The worker's first frame: what to load, and where contexts connect to."""

    functions: dict[str, tuple[str, str]]  # registered name -> (module, qualified name)
    main_path: str | None  # the file of the worker's __main__, for functions defined there
    redis_url: str | None
    namespace: str
    shards: int


class Ready(msgspec.Struct, frozen=True):
    """The answer to :class:`Hello`: None, or why the functions could not be loaded."""

    error: str | None = None


class Run(msgspec.Struct, frozen=True):
    """One task to run; ``context``: the function takes a ``context`` parameter."""

    task: LeasedTask
    context: bool = False


class RunEnded(msgspec.Struct, frozen=True):
    """How a run ended: its result, or an error (with the exception's type and traceback
    when one raised) and whether the task may be retried."""

    result: Any = None
    error: str | None = None
    retry: bool = True
    error_type: str = ""
    traceback: str = ""


def frame(body: bytes) -> bytes:
    """``body`` with its length header."""
    return HEADER.pack(len(body)) + body


def read_frame(stream: IO[bytes]) -> bytes | None:
    """The next frame's body, or None at the end of the stream."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME:
        raise ValueError(f"frame of {length} bytes")
    body = stream.read(length)
    return body if len(body) == length else None


def resolve(module: str, qualname: str, main: dict[str, Any] | None = None) -> Callable[..., Any]:
    """The function ``module.qualname`` (``main``: the globals of ``__main__``), unwrapped
    from its :class:`TaskFunction`; raises if the name does not lead to a callable."""
    parts = qualname.split(".")
    if module == "__main__":
        if main is None:
            raise LookupError("__main__ has no file to import")
        found: Any = main[parts[0]]
    else:
        found = getattr(importlib.import_module(module), parts[0])
    for part in parts[1:]:
        found = getattr(found, part)
    if isinstance(found, TaskFunction):
        found = found.func
    if not callable(found):
        raise TypeError(f"{module}.{qualname} is not callable")
    return found  # type: ignore[no-any-return]


class Child:
    """The functions of one worker, loaded in this process, and the runs it is sent."""

    def __init__(self, hello: Hello) -> None:
        self.hello = hello
        main = None
        if any(module == "__main__" for module, _ in hello.functions.values()):
            if hello.main_path is None:
                raise LookupError("functions are defined in __main__, which has no file")
            # As multiprocessing's spawn does: the script runs under another name, so its
            # `if __name__ == "__main__":` part (which starts the worker) does not.
            main = runpy.run_path(hello.main_path, run_name="__mp_main__")
        self.functions = {
            name: resolve(module, qualname, main)
            for name, (module, qualname) in hello.functions.items()
        }
        self._queue: Queue | None = None

    def queue(self) -> Queue:
        """A blocking client for contexts (XCom), opened at the first run that needs it."""
        if self._queue is None:
            from fairque.queue.client import open_queue

            hello = self.hello
            self._queue = open_queue(hello.redis_url, hello.namespace, hello.shards)
        return self._queue

    def run(self, request: Run) -> RunEnded:
        task = request.task
        function = self.functions.get(task.name or "")
        if function is None:
            return RunEnded(error=f"unknown task function {task.name!r}", retry=False)
        try:
            args, kwargs = call_arguments(task.payload)
        except InvalidInput as exc:
            return RunEnded(error=str(exc), retry=False)
        if request.context:
            kwargs["context"] = SyncTaskContext(task, self.queue())
        try:
            return RunEnded(result=function(*args, **kwargs))
        except Exception as exc:
            report = ErrorReport.of(exc)
            return RunEnded(error=report.message, error_type=report.type,
                            traceback=report.traceback)  # fmt: skip


def _reply(done: RunEnded) -> bytes:
    try:
        return msgspec.msgpack.encode(done)
    except (TypeError, ValueError, OverflowError) as exc:
        return msgspec.msgpack.encode(
            RunEnded(error=f"result: cannot be serialised with MessagePack: {exc}", retry=False)
        )


def _die_with(parent: int) -> None:
    """Asks Linux to kill this process when its worker dies, so a run never outlives the
    lease it runs under (elsewhere the child ends when its socket closes, after the run)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the worker died before the request took effect
        os._exit(1)


def main(argv: list[str]) -> int:
    """Serves one worker over the socket ``argv[0]`` until the worker closes it."""
    fd, parent = int(argv[0]), int(argv[1])
    _die_with(parent)
    # The worker decides when a run ends: a terminal's Ctrl-C or a service manager's
    # SIGTERM sent to every process does not cut a run short; the worker kills the child
    # (after its grace period) when that is what it must do.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with socket.socket(fileno=fd) as channel, channel.makefile("rb") as reader, \
            channel.makefile("wb") as writer:  # fmt: skip
        first = read_frame(reader)
        if first is None:
            return 0
        try:
            child = Child(msgspec.msgpack.decode(first, type=Hello))
        except Exception as exc:
            writer.write(frame(msgspec.msgpack.encode(Ready(f"{type(exc).__name__}: {exc}"))))
            writer.flush()
            return 1
        writer.write(frame(msgspec.msgpack.encode(Ready())))
        writer.flush()
        while (body := read_frame(reader)) is not None:
            done = child.run(msgspec.msgpack.decode(body, type=Run))
            writer.write(frame(_reply(done)))
            writer.flush()
    return 0
