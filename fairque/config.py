"""Queue settings and where the server is (design section 11)."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field

URL_ENV = "FAIRQUE_REDIS_URL"
DAY = 24 * 3600.0
TEN_YEARS = 10 * 366 * DAY
MAX_PAYLOAD_BYTES = 512 * 1024 * 1024  # the server's own limit on one string


class QueueSettings(BaseModel):
    """Behaviour of one queue namespace, shared by everything that uses it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Every bound keeps what the scripts store exact and readable (design section 6).
    max_payload_bytes: int = Field(default=1024 * 1024, ge=1, le=MAX_PAYLOAD_BYTES)
    retry_backoff_base: float = Field(default=1.0, ge=0, le=DAY)  # retry after base * 2^(n-1)
    retry_backoff_max: float = Field(default=3600.0, gt=0, le=30 * DAY)
    finished_ttl: float = Field(default=DAY, ge=0, le=TEN_YEARS)  # 0: drop finished tasks
    failed_ttl: float = Field(default=7 * DAY, ge=0, le=TEN_YEARS)  # seed 000: 7 days
    maintenance_batch: int = Field(default=100, ge=1, le=10_000)  # reaped/promoted per call
    xcom_ttl: float = Field(default=DAY, gt=0, le=366 * DAY)  # how long XCom values live


def redis_url(url: str | None) -> str:
    """The server to use: ``url``, else ``$FAIRQUE_REDIS_URL``, else the embedded Valkey."""
    if url:
        return url
    if env := os.environ.get(URL_ENV):
        return env
    from fairque.servers.embedded import ensure_server

    return ensure_server()
