"""``fairque tenant show|set|pause|resume NAME`` and ``fairque tenants``: a tenant's shares
of the queue (weight, concurrency and rate limits, paused), as the Web UI edits them; and
``fairque limit show|set|pause|resume NAME`` and ``fairque limits``: a task name's limits."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

import typer

from fairque.cli.common import JSON_OPTION, QueueTarget, Typer, console, fail, on_queue
from fairque.cli.listing import Listing, print_json
from fairque.cli.queue import STAT_COLUMNS
from fairque.engine.fields import LIMITS, SHARES, ShareField
from fairque.queue.models import TaskLimits, TenantShares

app = Typer(help="A tenant's shares: weight, concurrency and rate limits, pause.")

TENANT = typer.Argument(..., metavar="TENANT", help="The tenant (user_id of its tasks).")


def _limit(value: int, unit: str = "") -> str:
    return "-" if value == 0 else f"{value}{unit}"


def _state(one: TenantShares) -> str:
    if one.servable:
        return "served"
    if one.paused:
        return "paused"
    if one.window_opens_at is not None:
        opens = datetime.fromtimestamp(one.window_opens_at, timezone.utc)
        return f"rate window opens {opens:%H:%M:%S} UTC"
    return "at its concurrency limit" if one.ready else "no ready task"


def _print(shares: list[TenantShares], title: str) -> None:
    listing = Listing(
        title,
        ("tenant", "weight", "concurrency", "rate", "paused", "running", "ready", "state"),
        right=("weight", "concurrency", "running", "ready"),
    )
    for one in shares:
        rate = "-" if one.rate == 0 else f"{one.rate} per {one.period:g} s"
        listing.add(one.tenant, one.weight, _limit(one.concurrency), rate,
                    "yes" if one.paused else "no", one.running, one.ready, _state(one))  # fmt: skip
    listing.print()


@app.command("show")
@on_queue
def show(
    target: QueueTarget,
    tenant: str = TENANT,
    as_json: bool = JSON_OPTION,
) -> None:
    """A tenant's shares and where it stands (running, ready, served or held)."""
    with target.open_to_read() as queue:
        shares = queue.tenant(tenant)
    if as_json:
        print_json(dataclasses.asdict(shares))
    else:
        _print([shares], f"tenant {tenant} of {target.namespace}")


# The numbers `tenant set` and `limit set` take: the fields, but the flag (pause and resume).
SET_FIELDS = [field for field in SHARES if field.kind is not bool]
LIMIT_SET_FIELDS = [field for field in LIMITS if field.kind is not bool]


def _number(value: float | None) -> str:
    value = value or 0
    return f"{value:.0f}" if float(value).is_integer() else f"{value:g}"


def _share_options(
    fields: list[ShareField],
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Gives a command an option per field of ``fields`` (its help and bounds are the
    table's), before ``--json``: the table, not a copy, is the CLI's."""
    return lambda command: _with_options(command, fields)


def _with_options(command: Callable[..., None], fields: list[ShareField]) -> Callable[..., None]:
    signature = inspect.signature(command)
    parameters = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    last = next(i for i, p in enumerate(parameters) if p.name == "as_json")
    kind, options = parameters[0].kind, []
    for field in fields:
        help_text = f"{field.help} {_number(field.low)} to {_number(field.high)}."
        option = typer.Option(None, f"--{field.name}", metavar=field.metavar, help=help_text)
        options.append(
            inspect.Parameter(field.name, kind, default=option, annotation=field.kind | None)
        )
        command.__annotations__[field.name] = field.kind | None
    parameters[last:last] = options
    command.__dict__["__signature__"] = signature.replace(parameters=parameters)
    return command


@app.command("set")
@on_queue
@_share_options(SET_FIELDS)
def set_(
    target: QueueTarget,
    tenant: str = TENANT,
    as_json: bool = JSON_OPTION,
    **changes: float | None,
) -> None:
    """Change a tenant's shares (what you leave out keeps its value); applies at once."""
    if all(value is None for value in changes.values()):
        names = ", ".join(f"--{field.name}" for field in SET_FIELDS)
        raise fail(f"nothing to set: give one of {names}")
    with target.open() as queue:
        shares = queue.set_tenant(tenant, **changes)  # type: ignore[arg-type]
    if as_json:
        print_json(dataclasses.asdict(shares))
    else:
        _print([shares], f"tenant {tenant} of {target.namespace}")


def _pause(target: QueueTarget, tenant: str, paused: bool) -> None:
    with target.open() as queue:
        ready = queue.set_tenant(tenant, paused=paused).ready
    said = (
        f"paused {tenant}: {ready} ready tasks wait"
        if paused
        else f"resumed {tenant}: {ready} ready tasks"
    )
    console.print(said, highlight=False)


@app.command("pause")
@on_queue
def pause(target: QueueTarget, tenant: str = TENANT) -> None:
    """Nobody pops the tenant's tasks until it is resumed; they stay queued."""
    _pause(target, tenant, paused=True)


@app.command("resume")
@on_queue
def resume(target: QueueTarget, tenant: str = TENANT) -> None:
    """Workers pop the tenant's tasks again."""
    _pause(target, tenant, paused=False)


@on_queue
def tenants(
    target: QueueTarget,
    cursor: int = typer.Option(0, "--cursor", min=0, metavar="C", help="Where a page goes on."),
    limit: int = typer.Option(100, "--limit", metavar="N", help="Tenants per page (1 to 1000)."),
    busiest: bool = typer.Option(
        False, "--busiest", help="The tenants with ready tasks instead, the busiest first."
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """The tenants whose shares are not all defaults, a page at a time (with --busiest:
    the tenants with ready tasks, most ready first, and their lifetime counters)."""
    if busiest:
        _busiest(target, cursor, limit, as_json)
        return
    with target.open_to_read() as queue:
        page = queue.tenants_with_shares(cursor, limit)
    title = f"tenants with shares in {target.namespace}"
    _say_page("tenants", page.tenants, page.cursor, as_json, lambda: _print(page.tenants, title))


def _say_page(
    key: str, rows: Sequence[Any], cursor: int, as_json: bool, show: Callable[[], None]
) -> None:
    """A page of rows: as JSON ({key: rows, "cursor": cursor}), or shown, with where the
    next page begins."""
    if as_json:
        print_json({key: [dataclasses.asdict(one) for one in rows], "cursor": cursor})
        return
    show()
    if cursor:
        console.print(f"more: --cursor {cursor}", highlight=False)


def _busiest(target: QueueTarget, cursor: int, limit: int, as_json: bool) -> None:
    with target.open_to_read() as queue:
        page = queue.busiest_tenants(cursor, limit)
    if as_json:
        rows = [{"tenant": tenant, **dataclasses.asdict(figures)}
                for tenant, figures in page.tenants.items()]  # fmt: skip
        print_json({"tenants": rows, "cursor": page.cursor})
        return
    listing = Listing(
        f"tenants with ready tasks in {target.namespace}, the busiest first",
        ("tenant", *STAT_COLUMNS),
        right=STAT_COLUMNS,
    )
    for tenant, figures in page.tenants.items():
        values = dataclasses.asdict(figures)
        listing.add(tenant, *(values[column] for column in STAT_COLUMNS))
    listing.print()
    if page.cursor:
        console.print(f"more: --busiest --cursor {page.cursor}", highlight=False)


limit_app = Typer(
    help="A task name's limits across all workers: concurrency, rate, pause (with the "
    "tenants' shares: a task starts when both allow)."
)
NAME = typer.Argument(..., metavar="NAME", help="The task name (its function's).")


def _print_limits(limits: list[TaskLimits], title: str) -> None:
    listing = Listing(
        title, ("name", "concurrency", "rate", "paused", "running", "state", "task defaults"),
        right=("concurrency", "running"),
    )  # fmt: skip
    for one in limits:
        rate = "-" if one.rate == 0 else f"{one.rate} per {one.period:g} s"
        if one.paused:
            state = "paused"
        elif one.window_opens_at is not None:
            opens = datetime.fromtimestamp(one.window_opens_at, timezone.utc)
            state = f"rate window opens {opens:%H:%M:%S} UTC"
        elif one.concurrency and one.running >= one.concurrency:
            state = "at its concurrency limit"
        else:
            state = "starts"
        listing.add(one.name, _limit(one.concurrency), rate, "yes" if one.paused else "no",
                    one.running, state, _task_defaults(one))  # fmt: skip
    listing.print()


def _task_defaults(limits: TaskLimits) -> str:
    """The defaults a name gives its tasks, those it sets only ("-": none)."""
    given = [
        f"timeout {limits.timeout:g} s" if limits.timeout else "",
        f"{limits.max_retries} retries" if limits.max_retries >= 0 else "",
        f"priority {limits.priority}" if limits.priority else "",
        f"lease {limits.lease:g} s" if limits.lease else "",
    ]
    return ", ".join(part for part in given if part) or "-"


def _say_limits(limits: TaskLimits, as_json: bool, target: QueueTarget) -> None:
    if as_json:
        print_json(dataclasses.asdict(limits))
    else:
        _print_limits([limits], f"task name {limits.name} in {target.namespace}")


@limit_app.command("show")
@on_queue
def limit_show(target: QueueTarget, name: str = NAME, as_json: bool = JSON_OPTION) -> None:
    """A task name's limits and its tasks running now (counted while it has limits)."""
    with target.open_to_read() as queue:
        _say_limits(queue.limits(name), as_json, target)


@limit_app.command("set")
@on_queue
@_share_options(LIMIT_SET_FIELDS)
def limit_set(
    target: QueueTarget,
    name: str = NAME,
    as_json: bool = JSON_OPTION,
    **changes: float | None,
) -> None:
    """Change a task name's limits (what you leave out keeps its value; 0: no limit);
    applies at once, across all workers."""
    if all(value is None for value in changes.values()):
        names = ", ".join(f"--{field.name}" for field in LIMIT_SET_FIELDS)
        raise fail(f"nothing to set: give one of {names}")
    with target.open() as queue:
        _say_limits(queue.set_limits(name, **changes), as_json, target)  # type: ignore[arg-type]


@limit_app.command("pause")
@on_queue
def limit_pause(target: QueueTarget, name: str = NAME) -> None:
    """No worker starts tasks of the name until it is resumed; they stay queued."""
    with target.open() as queue:
        queue.set_limits(name, paused=True)
    console.print(f"paused {name}: its tasks wait", highlight=False)


@limit_app.command("resume")
@on_queue
def limit_resume(target: QueueTarget, name: str = NAME) -> None:
    """Workers start tasks of the name again."""
    with target.open() as queue:
        queue.set_limits(name, paused=False)
    console.print(f"resumed {name}", highlight=False)


@on_queue
def limits(
    target: QueueTarget,
    cursor: int = typer.Option(0, "--cursor", min=0, metavar="C", help="Where a page goes on."),
    limit: int = typer.Option(100, "--limit", metavar="N", help="Names per page (1 to 1000)."),
    as_json: bool = JSON_OPTION,
) -> None:
    """The task names with limits, a page at a time."""
    with target.open_to_read() as queue:
        page = queue.names_with_limits(cursor, limit)
    title = f"task names with limits in {target.namespace}"
    _say_page("names", page.names, page.cursor, as_json, lambda: _print_limits(page.names, title))


def register(root: Typer) -> None:
    """Adds ``tenant ...``, ``tenants``, ``limit ...`` and ``limits`` to ``root``."""
    root.add_typer(app, name="tenant")
    root.command("tenants")(tenants)
    root.add_typer(limit_app, name="limit")
    root.command("limits")(limits)
