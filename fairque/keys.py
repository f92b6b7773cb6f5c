"""The key schema (design section 3): every key of a namespace is ``fq:{<ns>}:<rest>``.

The hash tag puts all of a namespace's keys in one cluster slot, so every script is legal
on Redis Cluster. Scripts receive the fixed keys below as KEYS, in this order; the loader
gives them names inside Lua (``K.ring``, ``K['state:failed']``...).
"""

from __future__ import annotations

import re

from fairque.errors import InvalidInput

FIXED_KEYS: tuple[str, ...] = (
    "ring",  # zset: tenants with ready work, by last-served tick (round robin)
    "ready",  # hash: tenant -> ready tasks * 64 + bitmask of its non-empty queues (ready.lua)
    "scheduled",  # zset: ids not ready yet, by execute_after (us)
    "leases",  # zset: ids being executed, by lease deadline (us)
    "stats",  # hash: counters, in total and per tenant ("finished:<tenant>")
    "clock",  # string: last tick handed out (us), see include/base.lua
    "state:deferred",  # set: ids waiting on dependencies
    "deps:cursor",  # string: where reap's scan for orphaned dependencies goes on
    "state:finished",  # zset: ended ids, by the time their record expires (us)
    "state:failed",
    "state:canceled",
    "strict:partitions",  # set: strict-policy partitions that may hold ready jobs (strict.lua)
    "constraints",  # hash: constraint id -> MessagePack definition (JobMatcher and limits)
)

# The scheduler's keys (design section 8), after the fixed keys in its scripts' KEYS.
SCHEDULER_KEYS: tuple[str, ...] = (
    "schedules",  # hash: schedule id -> its definition (MessagePack)
    "schedules:next",  # zset: active schedule ids, by their next run (us)
    "schedules:status",  # hash: schedule id -> runs, failures, state... (MessagePack)
    "scheduler:instances",  # hash: instance id -> its state and counters (MessagePack)
)

# Seed 004's storage keys (fairque/storage), after the fixed keys in its scripts' KEYS
# (and in stats, which counts storage tasks too).
STORAGE_KEYS: tuple[str, ...] = (
    "storage:ids",  # string: last id given to a storage task
    "storage:queues",  # hash: numbered queue -> tasks it holds
)

_NAMESPACE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def namespace_prefix(namespace: str) -> str:
    """The key prefix of ``namespace``; refuses names that would break the hash tag."""
    if not _NAMESPACE.fullmatch(namespace):
        raise InvalidInput(
            "namespace",
            f"{namespace!r} must be 1 to 64 characters of letters, digits, '_', '.', ':' or '-'",
        )
    return f"fq:{{{namespace}}}:"


def fixed_keys(prefix: str) -> tuple[str, ...]:
    """The KEYS every script of the namespace with ``prefix`` receives."""
    return tuple(prefix + name for name in FIXED_KEYS)


def lock_key(prefix: str, schedule_id: str) -> str:
    """The scheduler's lock on one schedule (seed 002's distributed lock)."""
    return f"{prefix}scheduler:lock:{schedule_id}"
