"""The calls that read and change tenants' shares and task names' limits (their field
table is :mod:`fairque.queue.shares`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fairque.engine.calls import MAX_PAGE, Call
from fairque.engine.fields import LIMIT_ARGS, LIMITS, MICROS, SHARES
from fairque.engine.keys import Namespace
from fairque.errors import (
    InvalidInput,
)
from fairque.queue.calls.checks import check_name, check_positive
from fairque.queue.models import (
    LimitsPage,
    SharesPage,
    TaskLimits,
    TenantShares,
)
from fairque.queue.shares import (
    SharesChangeModel,
    change_args,
    read_shares,
)


def tenant(namespace: Namespace, tenant: str) -> Call[TenantShares]:
    """A tenant's shares and where it stands (every tenant has them: defaults)."""
    check_name(tenant, "user_id")
    return namespace.call("queue/tenant", ("get", tenant), _shares_of(tenant))


def set_tenant(namespace: Namespace, tenant: str, change: SharesChangeModel) -> Call[TenantShares]:
    """Changes a tenant's shares (None fields keep their value); applies at once."""
    check_name(tenant, "user_id")
    args = ("set", tenant, *change_args(change.given()))
    return namespace.call("queue/tenant", args, _shares_of(tenant))


def tenants_with_shares(
    namespace: Namespace, cursor: int = 0, count: int = 100
) -> Call[SharesPage]:
    """A page of the tenants whose shares are not all defaults; pass the cursor back
    for the next page (0: no more)."""
    if not 0 <= cursor < 2**63:
        raise InvalidInput("cursor", f"must be 0 or a cursor a page returned, got {cursor}")
    check_positive(count, "count", MAX_PAGE)
    return namespace.call("queue/tenant", ("list", cursor, int(count)), _parse_shares_page)


def limits(namespace: Namespace, name: str) -> Call[TaskLimits]:
    """A task name's limits and its tasks running (every name has them: none)."""
    check_name(name, "name")
    return namespace.call("queue/limits", ("get", name), _limits_of(name))


def set_limits(namespace: Namespace, name: str, change: SharesChangeModel) -> Call[TaskLimits]:
    """Changes a task name's limits (None fields keep their value); applies at once."""
    check_name(name, "name")
    args = ("set", name, *change_args(change.given(), LIMIT_ARGS))
    return namespace.call("queue/limits", args, _limits_of(name))


def names_with_limits(namespace: Namespace, cursor: int = 0, count: int = 100) -> Call[LimitsPage]:
    """A page of the task names with limits; pass the cursor back (0: no more)."""
    if not 0 <= cursor < 2**63:
        raise InvalidInput("cursor", f"must be 0 or a cursor a page returned, got {cursor}")
    check_positive(count, "count", MAX_PAGE)
    return namespace.call("queue/limits", ("list", cursor, int(count)), _parse_limits_page)


def shares_row(tenant: str, row: list[Any]) -> TenantShares:
    running, ready, servable, opens = (int(value) for value in row[len(SHARES) :])
    return TenantShares(
        tenant, **read_shares(row), running=running, ready=ready, servable=bool(servable),
        window_opens_at=None if opens < 0 else opens / MICROS,
    )  # fmt: skip


def _shares_of(tenant: str) -> Callable[[list[Any]], TenantShares]:
    return lambda row: shares_row(tenant, row)


def _limits_row(name: str, row: list[Any]) -> TaskLimits:
    running, opens = (int(value) for value in row[len(LIMIT_ARGS) :])
    return TaskLimits(
        name, **read_shares(row[1:], LIMITS), running=running,
        window_opens_at=None if opens < 0 else opens / MICROS,
    )  # fmt: skip


def _limits_of(name: str) -> Callable[[list[Any]], TaskLimits]:
    return lambda row: _limits_row(name, row)


def _parse_limits_page(reply: list[Any]) -> LimitsPage:
    names = [_limits_row(reply[i].decode(), reply[i + 1]) for i in range(1, len(reply), 2)]
    return LimitsPage(names=names, cursor=int(reply[0]))


def _parse_shares_page(reply: list[Any]) -> SharesPage:
    tenants = [shares_row(reply[i].decode(), reply[i + 1]) for i in range(1, len(reply), 2)]
    return SharesPage(tenants=tenants, cursor=int(reply[0]))
