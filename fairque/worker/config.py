"""Worker configuration: YAML (seed 001's layout) overridden by ``FAIRQUE_*`` variables.

```yaml
worker:
  id: "worker-001"
  assigned_users: ["user:1", "user:3"]
  steal_targets: ["user:2", "user:4"]
  poll_interval_seconds: 1.0
  task_timeout_seconds: 300
redis:
  url: "redis://localhost:6379/0"   # or host / port / db
```

Every worker field can be set as ``FAIRQUE_<FIELD>`` (``FAIRQUE_WORKER_ID`` for ``id``;
lists comma-separated), and the server as ``FAIRQUE_REDIS_URL``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field

from fairque.engine.calls import default_worker_id
from fairque.errors import InvalidInput

ENV_PREFIX = "FAIRQUE_"
_LIST_FIELDS = ("assigned_users", "steal_targets")


class WorkerConfig(BaseModel):
    """How one worker runs. Invalid values raise :class:`InvalidInput` naming the field."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default_factory=default_worker_id, min_length=1, max_length=256)
    assigned_users: list[str] | None = None  # these tenants first ...
    steal_targets: list[str] | None = None  # ... then these (work stealing)
    poll_interval_seconds: float = Field(default=1.0, gt=0, le=3600)
    task_timeout_seconds: float = Field(default=300.0, gt=0)
    concurrency: int = Field(default=10, ge=1, le=10_000)  # tasks run at once
    lease_seconds: float = Field(default=30.0, gt=0)  # extended by heartbeat while running
    grace_seconds: float = Field(default=10.0, ge=0)  # on SIGTERM, before handing back
    namespace: str = "default"
    shards: int = Field(default=1, ge=1, le=1024)  # > 1: serve namespace:0 .. namespace:N-1
    redis_url: str | None = None  # None: $FAIRQUE_REDIS_URL, else the embedded Valkey
    # Sync functions: on threads (a run past its timeout keeps its lease until it returns),
    # or in task processes (killed at the timeout). See fairque/worker/sync_runners.py.
    sync_runner: Literal["thread", "process"] = "thread"

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
    if not isinstance(document, dict) or set(document) - {"worker", "redis"}:
        raise InvalidInput("config", f"{path} must have a 'worker' and/or 'redis' section")
    values = dict(document.get("worker") or {})
    redis = document.get("redis") or {}
    if not isinstance(redis, dict):
        raise InvalidInput("redis", "must be a mapping (url, or host / port / db)")
    if "url" in redis:
        values["redis_url"] = redis["url"]
    elif redis:
        host, port, db = redis.get("host", "127.0.0.1"), redis.get("port", 6379), redis.get("db", 0)
        values["redis_url"] = f"redis://{host}:{port}/{db}"
    return values


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in WorkerConfig.model_fields:
        variable = ENV_PREFIX + ("WORKER_ID" if name == "id" else name.upper())
        if variable in env:
            raw = env[variable]
            values[name] = [part.strip() for part in raw.split(",") if part.strip()] if (
                name in _LIST_FIELDS) else raw  # fmt: skip
    return values


def load_config(
    path: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> WorkerConfig:
    """The configuration from ``path`` (YAML), then the environment, then ``overrides``."""
    values = _from_yaml(path) if path is not None else {}
    values.update(_from_env(os.environ if env is None else env))
    values.update(overrides or {})
    return WorkerConfig.from_values(values)
