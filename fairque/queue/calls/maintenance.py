"""The calls of a namespace's maintenance: rounds that expire leases, promote due tasks
and drop what expired, and when work comes due without a push."""

from __future__ import annotations

from fairque.engine.calls import Call
from fairque.engine.fields import MICROS
from fairque.engine.keys import Namespace
from fairque.queue.models import (
    Maintenance,
)

MAINTENANCE_INTERVAL = 2.0  # seconds between a namespace's maintenance rounds


MAINTENANCE_ROUNDS = 100  # rounds in a row, at most, while each hits its bound


def reap(namespace: Namespace, limit: int) -> Call[Maintenance]:
    """One maintenance round now, of at most ``limit`` of each kind of work."""
    return maintain(namespace, limit, 0.0)


def maintain(namespace: Namespace, limit: int | None, interval: float) -> Call[Maintenance]:
    """A maintenance round if the namespace's last one is ``interval`` seconds old
    (whoever ran it), of at most ``limit`` of each kind of work (None: ten times the
    namespace's maintenance_batch); parses to what it did (``ran`` False: none was
    due)."""
    micros = max(0, int(interval * MICROS))
    bound = "" if limit is None else limit
    return namespace.call("namespace/reap", (bound, micros), _parse_maintenance)


def next_due(namespace: Namespace, leases: bool = True) -> Call[float | None]:
    """Seconds until something becomes ready without a push: a scheduled task comes
    due, a tenant's rate window opens, or (with ``leases``) a lease expires; None if
    nothing will."""
    return namespace.call(
        "namespace/due", ("" if leases else "ready",),
        lambda reply: None if reply < 0 else reply / MICROS,
    )  # fmt: skip


def promote(namespace: Namespace, limit: int) -> Call[int]:
    """Makes up to ``limit`` due scheduled tasks ready."""
    return namespace.call("namespace/promote", (limit,), int)


def _parse_maintenance(reply: list[int]) -> Maintenance:
    ran, expired, promoted, dropped, orphaned, more = map(int, reply)
    return Maintenance(expired, promoted, dropped, orphaned, bool(ran), bool(more))
