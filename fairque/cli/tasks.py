"""``fairque task get|result|cancel|retry ID`` and ``fairque tasks``: inspecting and
steering tasks from the shell, as the Web UI does (``--json`` for scripts)."""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import typer

from fairque.cli.common import (
    JSON_OPTION,
    TENANT_NAMES,
    QueueTarget,
    Typer,
    console,
    errors,
    on_queue,
)
from fairque.cli.listing import Listing, print_json, when
from fairque.engine.records import ERRORS_KEPT, RecordKind, TaskState
from fairque.errors import TaskFailed
from fairque.jobs.ops import job_info
from fairque.queue.calls.tasks import task_info
from fairque.queue.client import Queue

app = Typer(help="One task by id: show it, wait for its result, cancel it, retry it.")

TASK_ID = typer.Argument(..., metavar="ID", help="Task id (as fairque push printed it).")
STATES = ", ".join(state.value for state in TaskState)


TIMES = ("_at", "_time", "_deadline")  # fields that hold a moment, as the Web UI shows them


def _shown(name: str, value: Any) -> str:
    """A field of ``task get`` as text: a state by its name, a time in UTC, other values
    as JSON (a payload, a list of ids)."""
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, float) and (name.endswith(TIMES) or name == "execute_after"):
        return when(value)
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _record(target: QueueTarget, task_id: str) -> dict[str, Any]:
    with target.open_to_read(f"task with id {task_id!r}") as queue:
        record = queue.get_record(task_id)
    if record is None:
        raise typer.Exit(_missing(task_id))
    if record.kind is RecordKind.TASK:
        return {"kind": "task", **dataclasses.asdict(task_info(record))}
    if record.kind is RecordKind.JOB:
        return {"kind": "job", **msgspec.to_builtins(job_info(record))}
    fields = {name: value.decode(errors="replace") for name, value in record.fields.items()}
    return {"kind": "storage", "id": task_id, **fields}


def _missing(task_id: str) -> int:
    errors.print(f"error: no task with id {task_id!r}", soft_wrap=True, markup=False)
    return 2


@app.command("get")
@on_queue
def get(
    target: QueueTarget,
    task_id: str = TASK_ID,
    as_json: bool = JSON_OPTION,
) -> None:
    """Everything stored about a task (or a JQ master job): state, payload, attempts, and
    the errors of its last failed attempts, with the newest traceback."""
    shown = _record(target, task_id)
    if as_json:
        print_json(shown)
        return
    attempt_errors = shown.pop("errors", ())
    listing = Listing(f"task {task_id}", ("field", "value"))
    for name, value in shown.items():
        if value not in (None, (), [], ""):
            listing.add(name, _shown(name, value))
    listing.print()
    if attempt_errors:
        typer.echo(_failed_attempts(attempt_errors))


def _failed_attempts(attempt_errors: Sequence[dict[str, Any]]) -> str:
    """The failed attempts a task keeps, one line each (the oldest first), then the
    newest traceback whole."""
    lines = ["", f"failed attempts (the last {ERRORS_KEPT} are kept):"]
    for one in attempt_errors:
        worker = one["worker_id"] or "-"
        lines.append(f"  #{one['attempt']}  {when(one['at'])}  {worker}  {one['message']}")
    traced = [one for one in attempt_errors if one["traceback"]]
    if traced:
        lines += ["", f"traceback of attempt #{traced[-1]['attempt']}:"]
        lines.append(traced[-1]["traceback"].rstrip("\n"))
    return "\n".join(lines)


@app.command("result")
@on_queue
def result(
    target: QueueTarget,
    task_id: str = TASK_ID,
    timeout: float | None = typer.Option(
        None, "--timeout", min=0, metavar="SECONDS", help="Give up after SECONDS (default: wait)."
    ),
) -> None:
    """Wait for a task pushed with --keep-result to end, and print its result as JSON.

    Exit 0 with the result; 1 if the task failed or was canceled (its last error on
    stderr); 2 for anything else (no such task, result not kept, timeout).
    """
    with target.open_to_read(f"task with id {task_id!r}") as queue:
        try:
            value = queue.result(task_id, timeout)
        except TaskFailed as exc:
            errors.print(f"failed: {exc}", soft_wrap=True, markup=False, highlight=False)
            raise typer.Exit(1) from None
    print_json(value)


def _act_on(
    target: QueueTarget, task_id: str, act: Callable[[Queue, str], bool], done: str, verb: str
) -> None:
    """Prints ``done`` if ``act`` took the task; else says what it is, and exit 1."""
    with target.open_to_read(f"task with id {task_id!r}") as queue:
        if act(queue, task_id):
            typer.echo(done)
            return
        info = queue.get_record(task_id)
    state = info.state.value if info is not None else "gone"
    errors.print(f"not {verb}: task {task_id!r} is {state}", soft_wrap=True, markup=False)
    raise typer.Exit(1)


@app.command("cancel")
@on_queue
def cancel(target: QueueTarget, task_id: str = TASK_ID) -> None:
    """Cancel a task that has not ended (and its dependents); exit 1 if it had.

    A running task ends CANCELED at once and its worker stops the run.
    """
    _act_on(target, task_id, Queue.cancel, "canceled", "canceled")


@app.command("retry")
@on_queue
def retry(target: QueueTarget, task_id: str = TASK_ID) -> None:
    """Queue a failed task again now; exit 1 if it had not failed."""
    _act_on(target, task_id, Queue.retry, "queued", "retried")


@on_queue
def tasks(
    target: QueueTarget,
    state: str = typer.Option(..., "--state", "-s", metavar="STATE", help=f"One of: {STATES}."),
    tenant: str | None = typer.Option(None, *TENANT_NAMES, metavar="TENANT", help="Only these."),
    name: str | None = typer.Option(None, "--name", metavar="NAME", help="Only tasks of NAME."),
    limit: int = typer.Option(
        50, "--limit", min=1, max=1000, metavar="N", help="Entries looked at for this page."
    ),
    cursor: int = typer.Option(0, "--cursor", min=0, metavar="C", help="Where a page goes on."),
    as_json: bool = JSON_OPTION,
) -> None:
    """List tasks (and JQ master jobs) in a state, newest first, as the Web UI does.

    A page may hold fewer than --limit tasks when --tenant or --name filters; the line
    after the table (or "cursor" in JSON) says how to go on, 0 when there is no more.
    """
    with target.open_to_read() as queue:
        page = queue.tasks(state, tenant, name, cursor, limit)
    rows = [dataclasses.asdict(summary) for summary in page.tasks]
    if as_json:
        print_json({"tasks": rows, "cursor": page.cursor})
        return
    listing = Listing(
        f"{state} tasks",
        ("id", "tenant", "name", "state", "priority", "attempts", "created (UTC)"),
        right=("priority", "attempts"),
    )
    for summary in page.tasks:
        listing.add(summary.task_id, summary.user_id or "-", summary.name or "-",
                    summary.state, summary.priority, summary.attempts,
                    when(summary.created_at))  # fmt: skip
    listing.print()
    if page.cursor:
        console.print(f"more: --cursor {page.cursor}", highlight=False)


def register(root: Typer) -> None:
    """Adds ``task ...`` and ``tasks`` to ``root``."""
    root.add_typer(app, name="task")
    root.command("tasks")(tasks)
