"""``fairque bulk retry|cancel|delete|empty``: acting on many tasks at once, by state,
tenant, task name and age (:meth:`fairque.FairQueue.bulk`).

An operation says how many tasks it selects with ``--dry-run`` and changes nothing; run
for real, it goes in batches that each hold the server a few milliseconds, shows its
progress on a terminal, and ends with how many tasks it acted on. Ctrl-C stops it
between two batches; the same command run again does the rest.
"""

from __future__ import annotations

import re
import signal
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from fairque.cli.common import (
    JSON_OPTION,
    TENANT_NAMES,
    QueueTarget,
    Typer,
    errors,
    on_queue,
    say,
)
from fairque.cli.listing import print_json
from fairque.engine.records import TaskState
from fairque.queue.calls.bulk import BULK_BATCH, BULK_STATES, MAX_BULK_BATCH, read_cursor
from fairque.queue.client import Queue
from fairque.queue.models import MAX_BULK_AGE, BulkAction, Selector, task_state

app = Typer(help="Retry, cancel or delete many tasks at once, by state, tenant, name and age.")

STOPPED = 130  # the exit code of a command stopped by Ctrl-C
DONE = {BulkAction.RETRY: "retried", BulkAction.CANCEL: "canceled", BulkAction.DELETE: "deleted"}
DOING = {
    BulkAction.RETRY: "retrying",
    BulkAction.CANCEL: "canceling",
    BulkAction.DELETE: "deleting",
}
UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
AGE_HINT = "'--older-than'"
_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")


def parse_age(text: str | None) -> float:
    """``--older-than``'s value in seconds: a number with s, m, h or d (seconds if none)."""
    if text is None:
        return 0.0
    found = _AGE.fullmatch(text.strip())
    if found is None:
        raise typer.BadParameter(
            f"{text!r}: give a number and s, m, h or d, e.g. 90m or 7d", param_hint=AGE_HINT
        )
    seconds = float(found[1]) * UNITS[found[2]]
    if seconds > MAX_BULK_AGE:
        raise typer.BadParameter(
            f"{text!r}: at most {MAX_BULK_AGE / 86400:g} days", param_hint=AGE_HINT
        )
    return seconds


TENANT = typer.Option(None, *TENANT_NAMES, metavar="TENANT", help="Only this tenant's tasks.")
NAME = typer.Option(None, "--name", metavar="NAME", help="Only tasks of NAME.")
OLDER_THAN = typer.Option(
    None,
    "--older-than",
    metavar="AGE",
    help="Only tasks that ended (waiting ones: were pushed) at least AGE ago: 90s, 30m, 12h, 7d.",
)
DRY_RUN = typer.Option(False, "--dry-run", help="Say how many tasks it selects; change nothing.")
BATCH = typer.Option(
    BULK_BATCH,
    "--batch",
    min=1,
    max=MAX_BULK_BATCH,
    metavar="N",
    help="Entries each call looks at (a retry holds the server ~1.5 ms per 100).",
)


def _state_option(action: BulkAction) -> Any:
    states = ", ".join(state.value for state in BULK_STATES[action])
    return typer.Option(None, "--state", "-s", metavar="STATE", help=f"Only one of: {states}.")


@contextmanager
def _stopped_by_ctrl_c() -> Iterator[list[bool]]:
    """While it lasts, Ctrl-C sets the flag it yields instead of interrupting: the loop
    ends after the batch the server is running."""
    asked = [False]
    previous = signal.getsignal(signal.SIGINT)

    def stop(_signum: int, _frame: types.FrameType | None) -> None:
        asked[0] = True

    signal.signal(signal.SIGINT, stop)
    try:
        yield asked
    finally:
        signal.signal(signal.SIGINT, previous)


def run_bulk(
    target: QueueTarget,
    action: BulkAction,
    selector: Selector,
    *,
    dry_run: bool,
    batch: int,
    as_json: bool,
    every_tenant: bool = False,
) -> None:
    """Runs an operation batch after batch to its end, or until Ctrl-C; prints how many
    tasks it selected (dry run) or acted on. With ``every_tenant``, then the queued tasks
    of each tenant that holds ready tasks when it begins, one tenant after the other
    (queued tasks are kept per tenant)."""
    selected = looked = 0
    show = errors.is_terminal and not as_json
    verb = "counting" if dry_run else DOING[action]
    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[selected]} selected"),
        console=errors, transient=True, disable=not show,
    )  # fmt: skip
    cursor: str | None = None
    totals: dict[tuple[int, str], int] = {}  # entries in each pass, at its start
    with target.open_to_read() as queue, progress, _stopped_by_ctrl_c() as asked:
        bar = progress.add_task(verb, total=None, selected=0)
        # Queued (and no tenant): nothing but the tenants' queued tasks.
        selectors = [] if every_tenant and selector.state is TaskState.QUEUED else [selector]
        if every_tenant:
            selectors += [Selector(TaskState.QUEUED, tenant, selector.name, selector.older_than)
                          for tenant in _tenants_with_ready(queue)]  # fmt: skip
        for each in selectors:
            cursor = ""
            while cursor is not None and not asked[0]:
                done = queue.bulk(action, each, cursor, dry_run=dry_run, batch=batch)
                removed = 0 if dry_run else done.selected
                totals.setdefault((read_cursor(cursor)[0], each.user_id or ""),
                                  done.total + removed)  # fmt: skip
                cursor = done.cursor
                selected, looked = selected + done.selected, looked + done.looked
                progress.update(
                    bar, completed=looked, total=max(looked, sum(totals.values())),
                    selected=selected,
                )  # fmt: skip
            if cursor is not None:
                break
    _report(action, selected, looked, dry_run=dry_run, stopped=cursor is not None, json=as_json)


def _tenants_with_ready(queue: Queue) -> list[str]:
    """Every tenant that holds ready tasks now (a page of 500 a call)."""
    tenants: list[str] = []
    cursor = 0
    while True:
        page = queue.busiest_tenants(cursor, 500)
        tenants.extend(page.tenants)
        cursor = page.cursor
        if cursor == 0:
            return sorted(set(tenants))


def _report(
    action: BulkAction, selected: int, looked: int, *, dry_run: bool, stopped: bool, json: bool
) -> None:
    if json:
        print_json({"action": action.value, "dry_run": dry_run, "selected": selected,
                    "looked": looked, "stopped": stopped})  # fmt: skip
    elif dry_run:
        typer.echo(f"would {action.value} {selected} tasks (looked at {looked} entries)")
    else:
        typer.echo(f"{DONE[action]} {selected} tasks (looked at {looked} entries)")
    if stopped:
        say("stopped by Ctrl-C between two batches: run the same command again for the rest")
        raise typer.Exit(STOPPED)


@app.command("retry")
@on_queue
def retry(
    target: QueueTarget,
    tenant: str | None = TENANT,
    name: str | None = NAME,
    older_than: str | None = OLDER_THAN,
    dry_run: bool = DRY_RUN,
    batch: int = BATCH,
    as_json: bool = JSON_OPTION,
) -> None:
    """Queue failed tasks again now (they keep their attempts)."""
    selector = Selector(TaskState.FAILED, tenant, name, parse_age(older_than))
    run_bulk(target, BulkAction.RETRY, selector, dry_run=dry_run, batch=batch, as_json=as_json)


@app.command("cancel")
@on_queue
def cancel(
    target: QueueTarget,
    state: str | None = _state_option(BulkAction.CANCEL),
    tenant: str | None = TENANT,
    name: str | None = NAME,
    older_than: str | None = OLDER_THAN,
    dry_run: bool = DRY_RUN,
    batch: int = BATCH,
    as_json: bool = JSON_OPTION,
) -> None:
    """Cancel waiting tasks (scheduled, deferred, queued), and the tasks that depend on
    them. Running tasks are left to "fairque task cancel". Without --tenant, queued tasks
    are canceled tenant after tenant (each that holds ready tasks when it begins)."""
    selector = Selector(_state(state), tenant, name, parse_age(older_than))
    every_tenant = tenant is None and selector.state in (None, TaskState.QUEUED)
    run_bulk(target, BulkAction.CANCEL, selector, dry_run=dry_run, batch=batch,
             as_json=as_json, every_tenant=every_tenant)  # fmt: skip


@app.command("delete")
@on_queue
def delete(
    target: QueueTarget,
    state: str | None = _state_option(BulkAction.DELETE),
    tenant: str | None = TENANT,
    name: str | None = NAME,
    older_than: str | None = OLDER_THAN,
    dry_run: bool = DRY_RUN,
    batch: int = BATCH,
    as_json: bool = JSON_OPTION,
) -> None:
    """Delete ended tasks (finished, failed, canceled) now, before their records expire;
    the tasks that wait for a deleted failed one are canceled."""
    selector = Selector(_state(state), tenant, name, parse_age(older_than))
    run_bulk(target, BulkAction.DELETE, selector, dry_run=dry_run, batch=batch, as_json=as_json)


@app.command("empty")
@on_queue
def empty(
    target: QueueTarget,
    tenant: str = typer.Argument(..., metavar="TENANT", help="The tenant whose backlog goes."),
    dry_run: bool = DRY_RUN,
    batch: int = BATCH,
    as_json: bool = JSON_OPTION,
) -> None:
    """Empty a tenant's backlog: cancel every task of it that waits (scheduled, deferred,
    queued), as "bulk cancel --tenant TENANT" does."""
    selector = Selector(user_id=tenant)
    run_bulk(target, BulkAction.CANCEL, selector, dry_run=dry_run, batch=batch, as_json=as_json)


def _state(value: str | None) -> TaskState | None:
    return None if value is None else task_state(value)


def register(root: Typer) -> None:
    """Adds ``bulk ...`` to ``root``."""
    root.add_typer(app, name="bulk")
