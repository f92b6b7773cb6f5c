"""Queue settings and where the server is (design section 11)."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field

URL_ENV = "FAIRQUE_REDIS_URL"


class QueueSettings(BaseModel):
    """Behaviour of one queue namespace, shared by everything that uses it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_payload_bytes: int = Field(default=1024 * 1024, ge=1)
    retry_backoff_base: float = Field(default=1.0, ge=0)  # retry after base * 2^(attempt-1) s
    retry_backoff_max: float = Field(default=3600.0, gt=0)
    finished_ttl: float = Field(default=24 * 3600.0, ge=0)  # 0: drop finished tasks at once
    failed_ttl: float = Field(default=7 * 24 * 3600.0, ge=0)  # seed 000: 7 days
    maintenance_batch: int = Field(default=100, ge=1, le=10_000)  # reaped/promoted per pop
    xcom_ttl: float = Field(default=24 * 3600.0, gt=0)  # how long XCom values live


def redis_url(url: str | None) -> str:
    """The server to use: ``url``, else ``$FAIRQUE_REDIS_URL``, else the embedded Valkey."""
    if url:
        return url
    if env := os.environ.get(URL_ENV):
        return env
    from fairque.engine.embedded import ensure_server

    return ensure_server()
