"""A storage from a URL: ``tarantool://host:port`` for Tarantool, anything else (or
nothing: the embedded Valkey) for the Redis storage. Used by the CLI and the examples."""

from __future__ import annotations

from typing import TypeGuard

from fairque.engine.connect import check_url
from fairque.storage.async_client import AsyncRedisStorage
from fairque.storage.async_tarantool import AsyncTarantoolStorage
from fairque.storage.blocking_tarantool import TarantoolStorage
from fairque.storage.client import RedisStorage

TARANTOOL_SCHEME = "tarantool://"


def is_tarantool(url: str | None) -> TypeGuard[str]:
    """True for a Tarantool URL, False for a Redis one or none (the embedded Valkey);
    raises :class:`~fairque.errors.InvalidInput` naming every scheme that works for any
    other."""
    if url is None:
        return False
    check_url(url, also=(TARANTOOL_SCHEME.removesuffix("://"),))
    return url.startswith(TARANTOOL_SCHEME)


def open_storage(
    url: str | None, namespace: str = "default", visibility_timeout: float | None = None
) -> RedisStorage | TarantoolStorage:
    """The blocking storage at ``url`` (nothing is sent before the first call)."""
    if is_tarantool(url):
        return TarantoolStorage(url, namespace, visibility_timeout=visibility_timeout)
    return RedisStorage(url, namespace, visibility_timeout=visibility_timeout)


def open_async_storage(
    url: str | None, namespace: str = "default", visibility_timeout: float | None = None
) -> AsyncRedisStorage | AsyncTarantoolStorage:
    """The asyncio storage at ``url``; close it (``async with``) when done."""
    if is_tarantool(url):
        return AsyncTarantoolStorage(url, namespace, visibility_timeout=visibility_timeout)
    return AsyncRedisStorage(url, namespace, visibility_timeout=visibility_timeout)
