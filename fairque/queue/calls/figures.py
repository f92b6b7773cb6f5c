"""The calls that read how the queue is doing: stats per state and tenant, the busiest
tenants, the fairness view and the backlog."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fairque.engine.calls import MAX_PAGE, Call, flat_rows
from fairque.engine.fields import MICROS
from fairque.engine.keys import Namespace
from fairque.engine.records import (
    TaskState,
)
from fairque.errors import (
    InvalidInput,
)
from fairque.queue.calls.checks import check_name, check_positive
from fairque.queue.calls.quotas import shares_row
from fairque.queue.models import (
    STATS_TENANTS,
    Backlog,
    FairnessView,
    Maintenance,
    MaintenanceStatus,
    MinuteFigures,
    QueueStats,
    TenantService,
    TenantStats,
    TenantStatsPage,
)

STATS_FAIRNESS_MINUTES, STATS_FAIRNESS_TOP = 5, 20  # as namespace/stats.lua reads them


MAX_FAIRNESS_TOP = 100  # tenants whose fairness figures one call reads


def stats(namespace: Namespace, fairness_top: int = STATS_FAIRNESS_TOP) -> Call[QueueStats]:
    """Counts per state, counters, and the busiest tenants' figures (O(1) in tenants),
    with the fairness figures of the ``fairness_top`` busiest (0 to 100)."""
    top = fairness_top
    if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_FAIRNESS_TOP:
        raise InvalidInput("fairness_top", f"must be a whole number from 0 to 100, got {top!r}")
    return namespace.call("namespace/stats", (STATS_TENANTS, fairness_top), _parse_stats)


def busiest_tenants(
    namespace: Namespace, cursor: int = 0, count: int = 50
) -> Call[TenantStatsPage]:
    """A page of the tenants with ready tasks, the busiest first; pass the cursor back
    for the next page (0: no more)."""
    if isinstance(cursor, bool) or not isinstance(cursor, int) or not 0 <= cursor < 2**53:
        raise InvalidInput("cursor", f"must be 0 or a cursor a page returned, got {cursor!r}")
    check_positive(count, "count", MAX_PAGE)

    def parse(reply: list[list[Any]]) -> TenantStatsPage:
        tenants = _tenant_rows(reply)
        following = cursor + count if len(tenants) == count else 0
        return TenantStatsPage(tenants, following)

    return namespace.call("namespace/tenant_stats", (cursor, int(count)), parse)


def tenant_stats(namespace: Namespace, tenant: str) -> Call[TenantStats]:
    """One tenant's ready tasks and lifetime counters (zero for an unknown tenant)."""
    check_name(tenant, "user_id")
    return namespace.call(
        "namespace/tenant_stats", (0, 1, tenant), lambda reply: _tenant_rows(reply)[tenant]
    )


def fairness(namespace: Namespace, minutes: int = 5, top: int = 20) -> Call[FairnessView]:
    """Who was served over the last ``minutes`` (1 to 10): every start, and the
    ``top`` (1 to 100) busiest tenants with their waits and shares."""
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= 10:
        raise InvalidInput("minutes", f"must be a whole number from 1 to 10, got {minutes!r}")
    if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= MAX_FAIRNESS_TOP:
        raise InvalidInput("top", f"must be a whole number from 1 to 100, got {top!r}")
    return namespace.call("namespace/fairness", (minutes, top), _fairness_of(minutes))


def backlog(namespace: Namespace, tenants: int) -> Call[Backlog]:
    """The age of the oldest ready task of the ``tenants`` busiest tenants and of the
    ``tenants`` the ring served longest ago."""
    if isinstance(tenants, bool) or not isinstance(tenants, int) or not 1 <= tenants <= 100:
        raise InvalidInput("tenants", f"must be an integer from 1 to 100, got {tenants!r}")

    def parse(reply: list[Any]) -> Backlog:
        now = int(reply[0])
        pairs = flat_rows(reply[1:], 2)
        return Backlog({t.decode(): max(0, now - int(at)) / MICROS for t, at in pairs})

    return namespace.call("namespace/backlog", (tenants,), parse)


def _fairness_of(minutes: int) -> Callable[[list[Any]], FairnessView]:
    def parse(reply: list[Any]) -> FairnessView:
        total = int(reply[1])
        served = []
        for i in range(4, len(reply), 5):
            tenant, starts = reply[i].decode(), int(reply[i + 1])
            served.append(TenantService(
                tenant=tenant, starts=starts, share=starts / total if total else 0.0,
                per_minute=starts / minutes, waits=tuple(int(n) for n in reply[i + 2]),
                starts_by_minute=tuple(int(n) for n in reply[i + 3]),
                shares=shares_row(tenant, reply[i + 4]),
            ))  # fmt: skip
        history = [
            MinuteFigures(
                at=int(m) * 60.0,
                starts=int(starts),
                pushed=int(pushed),
                finished=int(finished),
                failed=int(failed),
            )
            for m, starts, pushed, finished, failed in reply[3]
        ]
        return FairnessView(
            at=int(reply[0]) / MICROS, minutes=minutes, starts=total,
            waits=tuple(int(n) for n in reply[2]), tenants=served,
            other_starts=total - sum(one.starts for one in served), history=history,
        )  # fmt: skip

    return parse


def _pairs(flat: list[bytes]) -> dict[str, int]:
    return {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}


def _maintenance_status(flat: list[bytes]) -> MaintenanceStatus:
    fields = {flat[i].decode(): int(flat[i + 1]) for i in range(0, len(flat), 2)}
    if not fields:
        return MaintenanceStatus()
    last = Maintenance(
        fields["last_expired"],
        fields["last_promoted"],
        fields["last_dropped"],
        fields["last_orphaned"],
    )
    return MaintenanceStatus(
        fields["last_at"] / MICROS, fields["rounds"], fields.get("dropped", 0), last
    )


def _tenant_rows(rows: list[list[Any]]) -> dict[str, TenantStats]:
    """Stats rows as the scripts send them (include/tenant_stats.lua tenant_stat_row), in order:
    tenant, then TenantStats's fields in their order."""
    return {row[0].decode(): TenantStats(*map(int, row[1:])) for row in rows}


def _parse_stats(reply: list[Any]) -> QueueStats:
    states_flat, counters_flat, rows, maintenance_flat, fairness, sums, with_ready = reply
    return QueueStats(
        states={TaskState(name): count for name, count in _pairs(states_flat).items()},
        counters=_pairs(counters_flat),
        tenants=_tenant_rows(rows),
        maintenance=_maintenance_status(maintenance_flat),
        fairness=_fairness_of(STATS_FAIRNESS_MINUTES)(fairness),
        all_tenants=TenantStats(*map(int, sums)),
        tenants_with_ready=int(with_ready),
    )
