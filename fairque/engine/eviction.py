"""The eviction guard: a Redis / Valkey whose ``maxmemory-policy`` is not ``noeviction``
drops keys when memory runs short, task keys among them, and nothing says so. Every
long-running process checks once when it starts (:func:`eviction_warning`) and says it in
one line; a server that refuses ``CONFIG GET`` (a managed service, an ACL) is said to be
unchecked, once, and nothing fails.
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import NoPermissionError, ResponseError

from fairque.engine.connect import AsyncClient, SyncClient

SAFE_POLICY = "noeviction"
FIX = (
    "set it to noeviction (CONFIG SET maxmemory-policy noeviction, and maxmemory-policy "
    "noeviction in the server's configuration so that a restart keeps it)"
)


def _policies(reply: Any) -> set[str]:
    """The policies in a ``CONFIG GET maxmemory-policy`` reply: one server's
    ``{name: value}``, or a cluster's ``{node: {name: value}}``."""
    values = reply.values() if isinstance(reply, dict) else []
    found: set[str] = set()
    for value in values:
        if isinstance(value, dict):
            found |= _policies(value)
        else:
            found.add(value.decode() if isinstance(value, bytes) else str(value))
    return found


def _problem(reply: Any) -> str | None:
    unsafe = sorted(policy for policy in _policies(reply) if policy != SAFE_POLICY)
    if not unsafe:
        return None
    return (
        f"the server's maxmemory-policy is {', '.join(unsafe)}: when its memory runs short "
        f"it evicts keys, tasks among them, without a word; {FIX}"
    )


def _unchecked(exc: ResponseError) -> str:
    detail = " ".join(str(exc).split())
    return (
        f"could not check the server's maxmemory-policy (CONFIG GET refused: {detail}); "
        "make sure it is noeviction, or tasks may be evicted when memory runs short"
    )


REFUSED = (NoPermissionError, ResponseError)  # an ACL without CONFIG, a renamed command


def eviction_warning(client: SyncClient) -> str | None:
    """The warning to give about the server's eviction policy; None when it is safe."""
    try:
        return _problem(client.config_get("maxmemory-policy"))
    except REFUSED as exc:
        return _unchecked(exc)


def may_evict(client: SyncClient) -> bool | None:
    """Whether the server (a node of a cluster) may evict keys; None if it would not say."""
    try:
        return _problem(client.config_get("maxmemory-policy")) is not None
    except REFUSED:
        return None


async def async_eviction_warning(client: AsyncClient) -> str | None:
    """:func:`eviction_warning` for an asyncio client."""
    try:
        return _problem(await client.config_get("maxmemory-policy"))
    except REFUSED as exc:
        return _unchecked(exc)
