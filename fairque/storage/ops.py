"""The sans-IO core of the Redis storage: storage requests as engine script calls."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

from fairque.engine.calls import Arg, Call, pack
from fairque.engine.fields import MICROS
from fairque.engine.keys import Namespace
from fairque.storage.models import (
    PutTaskRequest,
    QueueStat,
    RetryInfo,
    Stats,
    StorageTask,
)
from fairque.storage.plan import (
    WorkerReport,
    decode_queues,
    decode_reports,
    encode_queues,
    encode_report,
)
from fairque.storage.requests import Requests

T = TypeVar("T")
_ROW = 6  # fields per task in a storage_get reply


def _micros(moment: datetime) -> int:
    return int(moment.timestamp() * MICROS)


def _time(micros: bytes | int) -> datetime:
    return datetime.fromtimestamp(int(micros) / MICROS, timezone.utc)


class StorageOps:
    """Builds the storage calls of one namespace."""

    def __init__(self, namespace: Namespace, visibility_timeout: float | None = None) -> None:
        self.namespace = namespace
        self.requests = Requests(visibility_timeout)

    def _call(
        self, name: str, args: Sequence[Arg], parse: Callable[[Any], T], queues: Sequence[int] = ()
    ) -> Call[T]:
        """A storage script's call; ``queues`` are the numbered queues whose keys it takes."""
        keys = [str(queue_num) for queue_num in queues]
        return self.namespace.call(f"storage/{name}", args, parse, more_keys=keys)

    def get_task(
        self, queue_num: int, count: int, visibility_timeout: float | None = None
    ) -> Call[list[StorageTask]]:
        take = self.requests.take(queue_num, count, visibility_timeout)
        args = (take.queue_num, take.count, repr(take.visibility))

        def parse(reply: list[Any]) -> list[StorageTask]:
            return [
                StorageTask(
                    int(reply[i]),
                    take.queue_num,
                    reply[i + 1],
                    int(reply[i + 2]),
                    _time(reply[i + 3]),
                    _time(reply[i + 4]),
                    _time(reply[i + 5]) if reply[i + 5] else None,
                )
                for i in range(0, len(reply), _ROW)
            ]

        return self._call("get", args, parse, (take.queue_num,))

    def done_task(self, task_ids: Sequence[int]) -> Call[int]:
        return self._call("done", self.requests.done(task_ids), int)

    def retry_task(self, retries: Sequence[RetryInfo]) -> Call[int]:
        checked = self.requests.retries(retries)
        rows = [value for task_id, moment in checked for value in (str(task_id), _micros(moment))]
        args = (len(checked), pack(rows))
        return self._call("retry", args, int)

    def put_tasks(self, requests: Sequence[PutTaskRequest]) -> Call[list[int]]:
        puts = self.requests.puts(requests)
        slots: dict[int, int] = {}
        rows: list[Any] = []  # the rows one after the other
        for put in puts:
            slot = slots.setdefault(put.queue_num, len(slots) + 1)
            if put.start_time is not None:
                start = str(_micros(put.start_time))
            elif put.delay is not None:
                start = f"+{int(put.delay.total_seconds() * MICROS)}"
            else:
                start = ""
            rows += (slot, put.queue_num, start)
        args: list[Arg] = [len(puts), pack(rows)]
        args += [put.data for put in puts]
        return self._call("put", args, lambda reply: [int(i) for i in reply], list(slots))

    def put_task(self, request: PutTaskRequest) -> Call[int]:
        return self.put_tasks([request]).then(lambda ids: ids[0])

    def get_stat(self) -> Call[Stats]:
        def parse(reply: list[int]) -> Stats:
            rows = (reply[i : i + 5] for i in range(0, len(reply), 5))
            return Stats({int(row[0]): QueueStat(*map(int, row)) for row in sorted(rows)})

        return self._call("stat", (), parse)

    # The Manager's board (fairque/storage/plan.py), all in script storage/plan.

    def _plan_call(self, args: Sequence[Arg], parse: Callable[[Any], T]) -> Call[T]:
        return self._call("plan", args, parse)

    def beat(self, report: WorkerReport, ttl: float) -> Call[list[int] | None]:
        beat = self.requests.beat(report, ttl)
        micros = int(beat.ttl * MICROS)
        args = ("beat", beat.report.worker_id, encode_report(beat.report), micros)
        return self._plan_call(args, lambda blob: decode_queues(blob) if blob else None)

    def workers(self) -> Call[list[WorkerReport]]:
        return self._plan_call(("workers",), decode_reports)

    def publish_plan(self, plan: Mapping[str, Sequence[int]]) -> Call[int]:
        args: list[Arg] = ["publish"]
        for worker, queues in self.requests.plan(plan).items():
            args += [worker, encode_queues(queues)]
        return self._plan_call(args, int)

    def read_plan(self) -> Call[dict[str, list[int]]]:
        def parse(reply: list[bytes]) -> dict[str, list[int]]:
            pairs = zip(reply[::2], reply[1::2], strict=True)
            return {worker.decode(): decode_queues(blob) for worker, blob in pairs}

        return self._plan_call(("read",), parse)
