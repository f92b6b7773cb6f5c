"""The job every queue runs in the benchmark of peers, and what its workers read at import.

Kept small (stdlib and redis-py): RQ's default worker imports it again in every forked
work horse, so its import time is part of each RQ job.

The job makes one Redis call of its own, as real jobs do: an EVALSHA of ``RECORD``
that INCRs a counter, keeps the earliest start time and the latest end time, and, for
jobs that carry an entry (latency and fairness runs), appends it with the job's start
time to a log. Times are this machine's wall clock: the job's ``time.time()`` and the
server's ``TIME``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import redis

URL_VARIABLE = "PEERS_REDIS_URL"
TENANTS_VARIABLE = "PEERS_TENANTS"  # set for fairness workers: the tenant queues to serve
# Set by instructions.py: a queue with tenants (fairque) spreads the jobs pushed without a
# tenant round-robin over this many; the others keep one plain queue.
SPREAD_VARIABLE = "PEERS_SPREAD"
COUNT, FIRST, LAST = "peers:count", "peers:first", "peers:last"
LOG, KINDS = "peers:log", "peers:kinds"
KEYS = [COUNT, FIRST, LAST, LOG, KINDS]

# KEYS: count, first start, last end, log, kinds; ARGV: the job's start time, its entry
# ('' for none, else "kind detail").
RECORD = """
local now = redis.call('TIME')
local count = redis.call('INCR', KEYS[1])
local first = redis.call('GET', KEYS[2])
if (not first) or tonumber(ARGV[1]) < tonumber(first) then
  redis.call('SET', KEYS[2], ARGV[1])
end
redis.call('SET', KEYS[3], now[1] .. '.' .. string.format('%06d', tonumber(now[2])))
if ARGV[2] ~= '' then
  redis.call('RPUSH', KEYS[4], ARGV[2] .. ' ' .. ARGV[1])
  redis.call('HINCRBY', KEYS[5], string.match(ARGV[2], '^%S+'), 1)
end
return count
"""


def url() -> str:
    """The benchmark's own server (run.py's throwaway one): there is no default."""
    return os.environ[URL_VARIABLE]


def tenants_listened() -> list[str]:
    """The tenant queues a fairness worker serves ([] for the other runs)."""
    value = os.environ.get(TENANTS_VARIABLE, "")
    return value.split(",") if value else []


def spread() -> int:
    """Tenants to spread untenanted jobs over (0: none, one "default" tenant)."""
    return int(os.environ.get(SPREAD_VARIABLE, "0"))


@dataclass
class Workers:
    """Worker commands as a user would type them (one OS process each), and their env."""

    commands: list[list[str]]
    env: dict[str, str] = field(default_factory=dict)
    grace: float = 20.0  # seconds from SIGTERM to SIGKILL of what is left


# A client per process, made on the job's first call.
_sync: list[Any] = []
_async: list[Any] = []


def record(entry: str) -> None:
    """The no-op job's body for sync workers: one Redis call."""
    started = time.time()
    if not _sync:
        _sync.append(redis.Redis.from_url(url()).register_script(RECORD))
    _sync[0](keys=KEYS, args=[f"{started:.6f}", entry])


async def arecord(entry: str) -> None:
    """The same for async workers, on an asyncio client."""
    started = time.time()
    if not _async:
        import redis.asyncio  # only async workers pay for this import

        _async.append(redis.asyncio.Redis.from_url(url()).register_script(RECORD))
    await _async[0](keys=KEYS, args=[f"{started:.6f}", entry])
