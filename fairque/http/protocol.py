"""The bodies exchanged between pushers, the master and workers, besides :mod:`fairque.jobs`."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from fairque.http.wire import encode_body
from fairque.jobs import JobOutcome
from fairque.jobs.models import Int32, Name, Value

MAX_RUNS = 1000  # jobs in one POST {worker url}/runs at most
MAX_FRAME = 64 * 1024 * 1024  # bytes of one result frame of a /runs answer at most
FRAME_HEAD = 4  # bytes of a frame's length, big-endian

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
    # Jobs it takes in one POST {url}/runs; 1: it serves /run only (one job per request).
    batch: Annotated[int, Meta(ge=1, le=MAX_RUNS)] = 1
    # The type of the bodies the master sends it and reads from it; null: the type of this
    # registration's own body.
    media_type: Literal["application/msgpack", "application/json"] | None = None


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
    """A job as the master hands it to a worker: POST {worker url}/run, or several in a
    list to POST {worker url}/runs."""

    id: str
    name: str
    argument: Value
    priority: Int32
    attempt: int  # 1 on the first run
    timeout: float  # seconds the master waits for the result object
    # Proves the job is still the worker's when it reports (POST {master}/jobs/{id}/report).
    lease_token: str = ""


class JobReport(msgspec.Struct, forbid_unknown_fields=True):
    """What a worker says about a job it runs: kept in the job's record (GET /jobs/{id})
    while ``lease_token`` (the job's JobRequest's) holds the job, refused with 409 once it
    does not. ``progress``: any finite number (a percentage, a count), null to leave it;
    ``message``: its first 200 characters are kept; ``lines``: log lines to add, the
    record keeps the newest 100, each cut to 1,000 characters."""

    lease_token: Annotated[str, Meta(min_length=1, max_length=64)]
    progress: float | None = None
    message: str = ""
    lines: list[str] = []


class Reported(msgspec.Struct):
    """A report was kept: the job's record holds ``lines`` log lines now."""

    lines: int


class Overview(msgspec.Struct):
    """Jobs per state, lifetime counters, and workers, for a dashboard."""

    states: dict[str, int]
    counters: dict[str, int]
    workers: list[WorkerStatus]


class ConstraintSaved(msgspec.Struct):
    """A constraint was stored; ``moved`` ready jobs were re-sorted by it."""

    moved: int


def result_frame(position: int, outcome: JobOutcome) -> bytes:
    """One frame of a ``/runs`` answer: the length of what follows (4 bytes, big-endian),
    then the MessagePack array ``[position of the job in the request, result object]``."""
    body = encode_body((position, outcome), as_json=False)
    return len(body).to_bytes(FRAME_HEAD, "big") + body


class BadFrame(ValueError):  # noqa: N818 - reads as "except BadFrame"
    """A frame of a ``/runs`` answer that is not ``[position, result object]``."""


class ResultFrames:
    """Splits the bytes of a ``/runs`` answer, as they arrive, into the frames' bodies."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """The frames ``data`` completes; raises :class:`BadFrame` for one over MAX_FRAME."""
        self._buffer += data
        frames: list[bytes] = []
        while len(self._buffer) >= FRAME_HEAD:
            size = int.from_bytes(self._buffer[:FRAME_HEAD], "big")
            if size > MAX_FRAME:
                raise BadFrame(f"a frame of {size} bytes (at most {MAX_FRAME})")
            end = FRAME_HEAD + size
            if len(self._buffer) < end:
                break
            frames.append(bytes(self._buffer[FRAME_HEAD:end]))
            del self._buffer[:end]
        return frames
