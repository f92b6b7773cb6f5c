"""Task functions: ``@task`` registers a function under a stable name.

A pushed task names its function and carries the arguments in its MessagePack payload
(``{"args": [...], "kwargs": {...}}``); a worker runs only registered functions, looked up
by name, and never imports or unpickles code it was sent.

>>> @task
... def add(x: int, y: int) -> int:
...     return x + y
>>> queue.push(add.build(args=[1, 2], user_id="alice"))  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from fairque.errors import InvalidInput
from fairque.queue.models import Task
from fairque.queue.shares import LimitsChange, SharesChangeModel


@dataclass(frozen=True)
class TaskFunction:
    """A registered function: call it directly, or ``build`` a Task that runs it.

    ``step`` and ``depends_on`` place it in a :class:`Pipeline` (its ``task_id``
    and ``depends_on``, naming other steps).
    """

    name: str
    func: Callable[..., Any]
    is_async: bool
    step: str | None = None
    depends_on: tuple[str, ...] = ()
    wants_context: bool = False  # it has a parameter named "context" (context.py)
    # Its tasks' defaults (timeout, max_retries, priority, lease), which a worker that
    # serves it sets on the server when it starts (FairQueue.set_limits): every pusher, of
    # any language, then gets them for a task that does not give its own.
    defaults: SharesChangeModel | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.func(*args, **kwargs)

    def build(
        self,
        *,
        user_id: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Task:
        """A Task running this function with ``args`` / ``kwargs`` for tenant ``user_id``.

        ``options`` are the other Task fields (priority, task_id, max_retries, timeout,
        ...); priority, max_retries and timeout left out take the name's defaults
        (``@task(timeout=...)``, :meth:`~fairque.FairQueue.set_limits`)."""
        payload = {"args": list(args), "kwargs": dict(kwargs or {})}
        return Task(user_id=user_id, name=self.name, payload=payload, **options)


@dataclass
class Registry:
    """Task functions by name."""

    functions: dict[str, TaskFunction] = field(default_factory=dict)

    def register(
        self,
        func: Callable[..., Any],
        name: str | None = None,
        step: str | None = None,
        depends_on: Sequence[str] = (),
        defaults: SharesChangeModel | None = None,
    ) -> TaskFunction:
        """Registers ``func`` under ``name`` (default: ``module.qualname``)."""
        name = name or f"{func.__module__}.{func.__qualname__}"
        known = self.functions.get(name)
        if known is not None and known.func is not func:
            raise InvalidInput("name", f"another function is registered as {name!r}")
        is_async = inspect.iscoroutinefunction(func)
        wants_context = "context" in inspect.signature(func).parameters
        registered = TaskFunction(
            name, func, is_async, step, tuple(depends_on), wants_context, defaults
        )
        self.functions[name] = registered
        return registered

    def get(self, name: str | None) -> TaskFunction | None:
        """The function registered as ``name``, if any."""
        return None if name is None else self.functions.get(name)

    def declared_defaults(self) -> list[tuple[str, dict[str, Any]]]:
        """The names whose functions declare their tasks' defaults (``@task(timeout=...)``),
        with those defaults: what a worker that serves them sets on the server."""
        return [
            (function.name, function.defaults.given())
            for function in self.functions.values()
            if function.defaults is not None
        ]


registry = Registry()


@overload
def task(func: Callable[..., Any], /) -> TaskFunction: ...


@overload
def task(
    *,
    name: str | None = None,
    into: Registry | None = None,
    task_id: str | None = None,
    depends_on: Sequence[str] = (),
    timeout: float | None = None,
    max_retries: int | None = None,
    priority: int | None = None,
    lease: float | None = None,
) -> Callable[[Callable[..., Any]], TaskFunction]: ...


def task(
    func: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    into: Registry | None = None,
    task_id: str | None = None,
    depends_on: Sequence[str] = (),
    timeout: float | None = None,
    max_retries: int | None = None,
    priority: int | None = None,
    lease: float | None = None,
) -> TaskFunction | Callable[[Callable[..., Any]], TaskFunction]:
    """Registers a sync or async function as a task: ``@task`` or ``@task(name="x")``;
    ``task_id`` and ``depends_on`` make it a pipeline step. ``timeout``, ``max_retries``,
    ``priority`` and ``lease`` are its tasks' defaults, set on the server by each worker
    that serves it when it starts (see :class:`TaskFunction`)."""
    target = into or registry
    given = {"timeout": timeout, "max_retries": max_retries, "priority": priority, "lease": lease}
    defaults = LimitsChange(**given) if any(v is not None for v in given.values()) else None

    def decorate(function: Callable[..., Any]) -> TaskFunction:
        return target.register(function, name, task_id, depends_on, defaults)

    return decorate if func is None else decorate(func)


def call_arguments(payload: Any) -> tuple[list[Any], dict[str, Any]]:
    """The (args, kwargs) a task payload carries (None: no arguments); refuses other shapes."""
    if payload is None:
        return [], {}
    if not isinstance(payload, dict) or set(payload) - {"args", "kwargs"}:
        raise InvalidInput("payload", 'a task function payload is {"args": [...], "kwargs": {}}')
    args, kwargs = payload.get("args", []), payload.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise InvalidInput("payload", "args must be a list and kwargs a map")
    return args, kwargs


class Pipeline:
    """Steps (``@task(task_id=..., depends_on=[...])`` functions) run in dependency order.

    Each :meth:`build` is one run with its own ids (``<run>.<step>``), so the same
    pipeline can run many times at once; push the run with ``push_many``, atomically.

    >>> run = Pipeline(extract, transform, load).build(user_id="alice")  # doctest: +SKIP
    >>> queue.push_many(run)  # doctest: +SKIP
    """

    def __init__(self, *steps: TaskFunction) -> None:
        names = [step.step or step.name for step in steps]
        if len(set(names)) != len(names):
            raise InvalidInput("steps", "two steps have the same task_id")
        known = set(names)
        for step, step_name in zip(steps, names, strict=True):
            missing = [name for name in step.depends_on if name not in known]
            if missing:
                raise InvalidInput("depends_on", f"step {step_name!r} depends on unknown "
                                   f"steps: {', '.join(missing)}")  # fmt: skip
        self.steps = dict(zip(names, steps, strict=True))

    def build(
        self,
        *,
        user_id: str,
        run_id: str | None = None,
        arguments: Mapping[str, Sequence[Any]] | None = None,
        **options: Any,
    ) -> list[Task]:
        """The tasks of one run; ``arguments`` maps a step to its positional arguments."""
        run = run_id or os.urandom(8).hex()
        arguments = arguments or {}
        return [
            function.build(
                user_id=user_id,
                args=arguments.get(step, ()),
                task_id=f"{run}.{step}",
                depends_on=tuple(f"{run}.{name}" for name in function.depends_on),
                **options,
            )
            for step, function in self.steps.items()
        ]
