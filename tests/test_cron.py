"""Next runs of cron schedules against a reference library (croniter), across time zones
and daylight-saving changes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter  # type: ignore[import-untyped]

from fairque.scheduler.cron import next_after

EXPRESSIONS = [
    "* * * * *", "*/7 * * * *", "0 * * * *", "30 2 * * *", "15 1 * * *", "0 0 * * 0",
    "5 4 * * sun", "0 22 * * 1-5", "23 0-20/2 * * *", "0 0,12 1 */2 *", "0 9-17 * * mon-fri",
    "59 23 31 12 *", "0 0 29 2 *", "0 3 * * 7", "*/15 2 * * *", "0 2 1,15 * 5",
    "45 1 * 3,10,11 *", "@daily", "@weekly",
]  # fmt: skip
ZONES = [
    "UTC", "Europe/Berlin", "America/New_York", "Australia/Sydney", "Asia/Kolkata",
    "America/Santiago", "Pacific/Chatham", "Europe/London", "Asia/Tokyo",
]  # fmt: skip
RUNS = 40


def transitions(tz: ZoneInfo, year: int = 2026) -> list[datetime]:
    """The moments (UTC, to the hour) the zone's offset changed in ``year``."""
    hours = [datetime(year, 1, 1, tzinfo=timezone.utc) + timedelta(hours=h) for h in range(8760)]
    offsets = [hour.astimezone(tz).utcoffset() for hour in hours]
    return [hours[i] for i in range(1, len(hours)) if offsets[i] != offsets[i - 1]]


def near_a_change(moment: float, tz: ZoneInfo) -> bool:
    before = datetime.fromtimestamp(moment - 3600, tz).utcoffset()
    return before != datetime.fromtimestamp(moment + 3600, tz).utcoffset()


@pytest.mark.parametrize("zone", ZONES)
def test_next_runs_agree_with_croniter(zone: str) -> None:
    """Every next run agrees with croniter, but for runs croniter makes around a
    daylight-saving change that cron does not: a fixed-time job run again in the
    repeated hour, and a job with a wildcard minute run at the end of the skipped hour.
    We follow cron (Debian's cron(8): "only jobs that run at a particular time are
    affected; jobs specified with wildcards are run based on the new time")."""
    tz = ZoneInfo(zone)
    changes = transitions(tz)
    starts = [datetime(2026, 1, 1, tzinfo=timezone.utc)]
    starts += [change - timedelta(minutes=25) for change in changes]
    compared = extra = 0
    for expression in EXPRESSIONS:
        for start in starts:
            ours = start.timestamp()
            reference = croniter(expression, start.astimezone(tz))
            theirs = reference.get_next(datetime).timestamp()
            for _ in range(RUNS):
                ours = next_after(expression, zone, ours)
                while theirs < ours:
                    assert near_a_change(theirs, tz), (expression, zone, theirs)
                    extra += 1
                    theirs = reference.get_next(datetime).timestamp()
                assert ours == theirs, (expression, zone, datetime.fromtimestamp(ours, tz))
                theirs = reference.get_next(datetime).timestamp()
                compared += 1
    assert compared == len(EXPRESSIONS) * len(starts) * RUNS
    if not changes:
        assert extra == 0
    elif zone in ("Europe/Berlin", "Europe/London", "America/New_York", "Australia/Sydney"):
        assert extra > 0  # the windows did reach the hours where cron and croniter differ


def runs(expression: str, zone: str, start: datetime, count: int) -> list[str]:
    moment, shown = start.timestamp(), []
    for _ in range(count):
        moment = next_after(expression, zone, moment)
        shown.append(datetime.fromtimestamp(moment, ZoneInfo(zone)).isoformat())
    return shown


def test_a_daily_run_in_the_skipped_hour_happens_when_the_clocks_go_forward() -> None:
    start = datetime(2026, 3, 28, 12, tzinfo=timezone.utc)
    assert runs("30 2 * * *", "Europe/Berlin", start, 2) == [
        "2026-03-29T03:00:00+02:00",  # 02:30 does not exist that night
        "2026-03-30T02:30:00+02:00",
    ]


def test_a_daily_run_in_the_repeated_hour_happens_once_when_the_clocks_go_back() -> None:
    start = datetime(2026, 10, 24, 12, tzinfo=timezone.utc)
    assert runs("30 2 * * *", "Europe/Berlin", start, 2) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
    ]


def test_an_hourly_run_happens_in_both_repeated_hours() -> None:
    start = datetime(2026, 10, 24, 23, 30, tzinfo=timezone.utc)
    assert runs("0 * * * *", "Europe/Berlin", start, 3) == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T03:00:00+01:00",
    ]


def test_seconds_are_a_sixth_field_first() -> None:
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert runs("*/20 * * * * *", "UTC", start, 3) == [
        "2026-01-01T00:00:20+00:00",
        "2026-01-01T00:00:40+00:00",
        "2026-01-01T00:01:00+00:00",
    ]
