"""Cron expressions in a time zone: validation that names the bad field, and next runs.

The expression is evaluated by cronsim in the schedule's wall-clock time, which gives
the behaviour cron users expect across daylight-saving changes: a daily job at 02:30
runs once on the day the clocks skip 02:00-03:00 (at 03:00) and once on the day they
repeat it, while an hourly job runs in both repeated hours.
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from fairque.errors import InvalidInput

_FIVE_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_RANGES = {
    "second": (0, 59),
    "minute": (0, 59),
    "hour": (0, 23),
    "day-of-month": (1, 31),
    "month": (1, 12),
    "day-of-week": (0, 7),
}
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@cache
def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``; refuses unknown names."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput("timezone", f"unknown time zone {name!r}") from None


def _expand(expression: str) -> str:
    return MACROS.get(expression.strip().lower(), expression.strip())


def _field_error(fields: list[str], failure: str) -> InvalidInput:
    """Turns cronsim's "Bad <field>" into a message naming the field and its value."""
    names = _FIVE_FIELDS if len(fields) == 5 else ("second", *_FIVE_FIELDS)
    name = failure.removeprefix("Bad ")
    if name not in names:
        return InvalidInput("cron", failure)
    value = fields[names.index(name)]
    low, high = _RANGES[name]
    if value.isdigit() and not low <= int(value) <= high:
        return InvalidInput("cron", f"{name} field: {value} out of range {low}-{high}")
    if value.isdigit():
        return InvalidInput("cron", f"{name} field: {value} never occurs with the other fields")
    return InvalidInput(
        "cron", f"{name} field: {value!r} is not valid (numbers {low}-{high}, *, a-b, */n, lists)"
    )


def check(expression: str, timezone_name: str) -> None:
    """Refuses an invalid expression or time zone, naming the part that is wrong."""
    tz = zone(timezone_name)
    fields = _expand(expression).split()
    if len(fields) not in (5, 6):
        raise InvalidInput(
            "cron",
            f"expected 5 fields ({' '.join(_FIVE_FIELDS)}) or 6 with seconds first, "
            f"got {len(fields)}: {expression!r}",
        )
    try:
        CronSim(" ".join(fields), datetime.now(tz))
    except CronSimError as exc:
        raise _field_error(fields, str(exc)) from None


def next_after(expression: str, timezone_name: str, after: float) -> float:
    """The first run strictly after epoch second ``after``, in epoch seconds."""
    tz = zone(timezone_name)
    start = datetime.fromtimestamp(after, timezone.utc).astimezone(tz)
    return next(CronSim(_expand(expression), start)).timestamp()
