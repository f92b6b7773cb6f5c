"""Settings of a scheduler instance (its configuration parameters)."""

from __future__ import annotations

from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field, ModelWrapValidatorHandler

from fairque.engine.records import check_identifier
from fairque.errors import InvalidInput, validated

LIVE_CYCLES = 3  # an instance is live while its last heartbeat is this many polls old ...
LIVE_SLACK = 1.0  # ... plus this (s): a cycle's own work, a busy server
MAX_INSTANCE_TTL = 30 * 24 * 3600.0


def live_window(poll_interval: float) -> float:
    """How long after its last heartbeat an instance polling every ``poll_interval``
    seconds still counts as live (it beats at every cycle, at most ``poll_interval``
    apart while the server answers)."""
    return LIVE_CYCLES * poll_interval + LIVE_SLACK


class SchedulerConfig(BaseModel):
    """How one scheduler instance polls, locks and retries.

    Invalid values raise :class:`fairque.InvalidInput` naming the field.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    poll_interval: float = Field(default=1.0, gt=0, le=60)  # longest sleep between cycles (s)
    lock_timeout: float = Field(default=30.0, gt=0, le=3600)  # a dead holder's lock expires
    max_submit_retries: int = Field(default=3, ge=0, le=100)  # then the schedule is FAILED
    retry_backoff_base: float = Field(default=1.0, gt=0)  # retry after base * 2^(n-1) s
    retry_backoff_max: float = Field(default=300.0, gt=0)
    batch: int = Field(default=100, ge=1, le=10_000)  # due schedules handled per cycle
    instance_id: str | None = None  # default: host:pid:random
    # health_check(): a cycle older than this many poll intervals is a warning, then an error
    stale_cycles_warning: float = Field(default=5, gt=0)
    stale_cycles_error: float = Field(default=30, gt=0)
    # health_check(): failed share of the recent submissions for a warning, then an error
    error_rate_warning: float = Field(default=0.1, gt=0, le=1)
    error_rate_error: float = Field(default=0.5, gt=0, le=1)
    # An instance's record is dropped this long after its last heartbeat (s); until then a
    # killed instance is reported as stale.
    instance_ttl: float = Field(default=3600.0, gt=0, le=MAX_INSTANCE_TTL)

    @pydantic.model_validator(mode="wrap")
    @classmethod
    def _raise_fairque_error(
        cls, data: Any, handler: ModelWrapValidatorHandler[SchedulerConfig]
    ) -> SchedulerConfig:
        config = validated(handler, data)
        window = live_window(config.poll_interval)
        if config.instance_ttl <= window:
            raise InvalidInput("instance_ttl", f"must be longer than {window:g} s, the time "
                               "a live instance may go between heartbeats")  # fmt: skip
        return config

    @pydantic.field_validator("instance_id")
    @classmethod
    def _check_id(cls, value: str | None) -> str | None:
        return None if value is None else check_identifier(value)
