"""Running one task function directly, as a worker would run it, with a fake context.

Its arguments and its result go through MessagePack, as a pushed task's do (so a tuple
arrives a list, and an argument or result the queue cannot carry is refused here, not in
production); a function that takes a ``context`` gets a fake one
(:class:`~fairque.testing.FakeContext`, :class:`~fairque.testing.AsyncFakeContext`), or
the one given.
"""

from __future__ import annotations

from typing import Any

from fairque.errors import InvalidInput
from fairque.runners.fair_worker.functions import TaskFunction, call_arguments
from fairque.testing.context import AsyncFakeContext
from fairque.testing.leased import leased_task, through_messagepack
from fairque.testing.sync_context import FakeContext


def _check_kind(function: TaskFunction, is_async: bool) -> None:
    if not isinstance(function, TaskFunction):
        raise InvalidInput("function", "give a function decorated with @task")
    if function.is_async and not is_async:
        raise InvalidInput("function", f"{function.name} is async: await async_run_task(...)")
    if is_async and not function.is_async:
        raise InvalidInput("function", f"{function.name} is not async: call run_task(...)")


def _call_arguments(
    function: TaskFunction,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    context: FakeContext | AsyncFakeContext | None,
    make_context: type[FakeContext | AsyncFakeContext],
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments the function is called with, as a worker would call it."""
    leased = leased_task(function.name, {"args": list(args), "kwargs": kwargs})
    delivered_args, delivered_kwargs = call_arguments(leased.payload)
    if function.wants_context:
        delivered_kwargs["context"] = context or make_context(task=leased)
    elif context is not None:
        raise InvalidInput("context", f"{function.name} has no parameter named context")
    return delivered_args, delivered_kwargs


def run_task(
    function: TaskFunction, *args: Any, context: FakeContext | None = None, **kwargs: Any
) -> Any:
    """Runs a sync task function with ``args`` and ``kwargs`` and returns its result;
    ``context``: the fake context it gets (a new one unless given)."""
    _check_kind(function, is_async=False)
    call_args, call_kwargs = _call_arguments(function, args, kwargs, context, FakeContext)
    return through_messagepack(function.func(*call_args, **call_kwargs), "result")


async def async_run_task(
    function: TaskFunction, *args: Any, context: AsyncFakeContext | None = None, **kwargs: Any
) -> Any:
    """Runs an async task function as :func:`run_task` runs a sync one."""
    _check_kind(function, is_async=True)
    call_args, call_kwargs = _call_arguments(function, args, kwargs, context, AsyncFakeContext)
    return through_messagepack(await function.func(*call_args, **call_kwargs), "result")
