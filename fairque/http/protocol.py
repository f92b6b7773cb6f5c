"""The bodies exchanged between pushers, the master and workers, besides :mod:`fairque.jobs`."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from fairque.jobs.models import Int32, Name, Value

# Spelled out rather than with \s, which Python's re and JSON Schema's (ECMA) regexes
# read differently (\x1f is whitespace to Python only): no controls, no spaces.
URL_PATTERN = r"^https?://[^\x00-\x20\x7f/]+(/[^\x00-\x20\x7f]*)?$"
Url = Annotated[str, Meta(pattern=URL_PATTERN, max_length=2048)]


class JobCreated(msgspec.Struct):
    """The id given to an enqueued job."""

    id: str


class JobsCreated(msgspec.Struct):
    """The ids given to a batch of jobs, in order."""

    ids: list[str]


class Done(msgspec.Struct):
    """Whether an action (cancel, retry) took effect."""

    done: bool


class WorkerRegistration(msgspec.Struct, forbid_unknown_fields=True):
    """A worker announcing itself; sent again as its heartbeat."""

    url: Url  # where the master sends jobs: POST {url}/run
    names: Annotated[list[Name], Meta(min_length=1, max_length=1000)]  # job names it runs
    capacity: Annotated[int, Meta(ge=1, le=1000)] = 1  # jobs it runs at once


class WorkerAck(msgspec.Struct):
    """The master's answer to a registration: heartbeat again within ``heartbeat`` s."""

    heartbeat: float


class WorkerStatus(msgspec.Struct):
    """A registered worker and the jobs it is running now."""

    id: str
    url: str
    names: list[str]
    capacity: int
    running: int
    seen_seconds_ago: float


class JobRequest(msgspec.Struct):
    """A job as the master hands it to a worker: POST {worker url}/run."""

    id: str
    name: str
    argument: Value
    priority: Int32
    attempt: int  # 1 on the first run
    timeout: float  # seconds the master waits for the result object


class Overview(msgspec.Struct):
    """Jobs per state, lifetime counters, and workers, for a dashboard."""

    states: dict[str, int]
    counters: dict[str, int]
    workers: list[WorkerStatus]


class ConstraintSaved(msgspec.Struct):
    """A constraint was stored; ``moved`` ready jobs were re-sorted by it."""

    moved: int
