"""Worker configuration: YAML overridden by ``FAIRQUE_*`` variables.

```yaml
worker:
  id: "worker-001"
  assigned_users: ["user:1", "user:3"]
  steal_targets: ["user:2", "user:4"]
  poll_interval_seconds: 45.0
  task_timeout_seconds: 300
redis:
  url: "redis://localhost:6379/0"   # or host / port / db / username / password
settings:                           # the namespace's QueueSettings, written at start
  finished_ttl: 3600
```

Every worker field can be set as ``FAIRQUE_<FIELD>`` (``FAIRQUE_WORKER_ID`` for ``id``;
lists comma-separated), every setting as ``FAIRQUE_<SETTING>`` (``FAIRQUE_FINISHED_TTL``),
and the server as ``FAIRQUE_REDIS_URL``. Unknown sections and keys are refused, naming them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field

from fairque.config import QueueSettings
from fairque.engine.calls import default_worker_id
from fairque.engine.connect import check_url
from fairque.engine.fields import MAX_TIMEOUT_SECONDS
from fairque.errors import InvalidInput

ENV_PREFIX = "FAIRQUE_"
WAKE_CHECK_SECONDS = 0.25  # how often an idle worker's listeners look at its stop flag
_LIST_FIELDS = ("assigned_users", "steal_targets")


class WorkerConfig(BaseModel):
    """How one worker runs. Invalid values raise :class:`InvalidInput` naming the field."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default_factory=default_worker_id, min_length=1, max_length=256)
    assigned_users: list[str] | None = None  # these tenants first ...
    steal_targets: list[str] | None = None  # ... then these (work stealing)
    # The longest an idle worker waits before it looks again, a safety net: work that
    # arrives or comes due wakes it at once (fetch.py). Its registry entry lives a third
    # longer (10 s at least), so a dead idle worker leaves the registry within a minute
    # by default. Each wait costs the server a call and a connection made (~200k
    # instructions): 45 s, not 30 s, makes an idle worker a third cheaper.
    poll_interval_seconds: float = Field(default=45.0, gt=0, le=3600)
    task_timeout_seconds: float = Field(default=300.0, gt=0, le=MAX_TIMEOUT_SECONDS)
    concurrency: int = Field(default=10, ge=1, le=10_000)  # tasks run at once
    # Extended by heartbeat while running.
    lease_seconds: float = Field(default=30.0, gt=0, le=MAX_TIMEOUT_SECONDS)
    grace_seconds: float = Field(default=10.0, ge=0, le=3600)  # on SIGTERM, before handing back
    # How often the namespace is tidied (a round runs when the last one, by any process, is
    # this old): expired leases, due tasks, registries of expired ended tasks.
    maintenance_interval_seconds: float = Field(default=2.0, gt=0, le=3600)
    # A task whose function this worker lacks goes back, due again after this delay, for a
    # worker that has it; it fails when no live worker has served it for the grace.
    hand_over_delay_seconds: float = Field(default=1.0, gt=0, le=3600)
    unserved_grace_seconds: float = Field(default=60.0, gt=0, le=7 * 24 * 3600)
    namespace: str = "default"
    shards: int = Field(default=1, ge=1, le=1024)  # > 1: serve namespace:0 .. namespace:N-1
    redis_url: str | None = None  # None: $FAIRQUE_REDIS_URL, else the embedded Valkey
    # Written for the namespace when the worker starts (the settings live in the server and
    # apply to every client of the namespace); None keeps what the namespace has.
    settings: QueueSettings | None = None
    # Sync functions: on threads (a run past its timeout keeps its lease until it returns),
    # or in task processes (killed at the timeout). See fairque/runners/fair_worker/sync_runners.py.
    sync_runner: Literal["thread", "process"] = "thread"

    @pydantic.field_validator("redis_url")
    @classmethod
    def _known_scheme(cls, url: str | None) -> str | None:
        # Refused with the rest of the configuration, before the worker says it starts.
        if url is not None:
            try:
                check_url(url)
            except InvalidInput as exc:
                raise ValueError(exc.message) from None
        return url

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> WorkerConfig:
        """Validates ``values``, raising :class:`InvalidInput` that names the bad field."""
        try:
            return cls.model_validate(dict(values))
        except pydantic.ValidationError as exc:
            raise InvalidInput.from_errors(exc.errors()) from None


def _from_yaml(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise InvalidInput("config", f"cannot read {path}: {exc}") from None
    if not isinstance(document, dict):
        raise InvalidInput("config", f"{path} must have a 'worker' and/or 'redis' section")
    for section in document:
        if section not in _SECTIONS:
            raise InvalidInput(str(section), f"unknown section (expected one of {_SECTIONS})")
    values = dict(document.get("worker") or {})
    if document.get("settings") is not None:
        values["settings"] = document["settings"]
    redis = document.get("redis") or {}
    if not isinstance(redis, dict):
        raise InvalidInput("redis", "must be a mapping (url, or host / port / db)")
    for key in redis:
        if key not in _REDIS_KEYS:
            raise InvalidInput(f"redis.{key}", f"unknown key (expected one of {_REDIS_KEYS})")
    if "url" in redis:
        if set(redis) != {"url"}:
            raise InvalidInput("redis.url", "give url, or host / port / db / password: not both")
        values["redis_url"] = redis["url"]
    elif redis:
        values["redis_url"] = _url_of(redis)
    return values


_REDIS_KEYS = ("url", "host", "port", "db", "username", "password")
_SECTIONS = ("worker", "redis", "settings")


def _url_of(redis: Mapping[str, Any]) -> str:
    """The URL of the YAML's host / port / db section (and credentials, if given)."""
    host, port, db = redis.get("host", "127.0.0.1"), redis.get("port", 6379), redis.get("db", 0)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise InvalidInput("redis.port", f"must be a port number, got {port!r}")
    if isinstance(db, bool) or not isinstance(db, int) or not 0 <= db < 2**16:
        raise InvalidInput("redis.db", f"must be a database number, got {db!r}")
    credentials = ""
    if "password" in redis:
        user = quote(str(redis.get("username", "")), safe="")
        credentials = f"{user}:{quote(str(redis['password']), safe='')}@"
    host_text = f"[{host}]" if ":" in str(host) else str(host)
    return f"redis://{credentials}{host_text}:{port}/{db}"


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in WorkerConfig.model_fields:
        variable = ENV_PREFIX + ("WORKER_ID" if name == "id" else name.upper())
        if variable in env and name != "settings":
            raw = env[variable]
            values[name] = [part.strip() for part in raw.split(",") if part.strip()] if (
                name in _LIST_FIELDS) else raw  # fmt: skip
    settings = {
        name: env[ENV_PREFIX + name.upper()]
        for name in QueueSettings.model_fields
        if ENV_PREFIX + name.upper() in env
    }
    if settings:
        values["settings"] = settings
    return values


def load_config(
    path: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> WorkerConfig:
    """The configuration from ``path`` (YAML), then the environment, then ``overrides``."""
    values = _from_yaml(path) if path is not None else {}
    from_env = _from_env(os.environ if env is None else env)
    if "settings" in values and "settings" in from_env:  # variables override file values
        from_env["settings"] = {**values["settings"], **from_env["settings"]}
    values.update(from_env)
    values.update(overrides or {})
    return WorkerConfig.from_values(values)
