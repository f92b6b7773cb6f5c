"""A job's life through the client generated from ``docs/openapi.json``, with no
hand-written HTTP or encoding: push one job and a batch, read a result (once), see a job's
progress, a failure and its retry, cancel a job, and a bad request answered 400. Run
``worker.py`` beside it (the same generated packages on ``PYTHONPATH``):

    PYTHONPATH=generated python examples/generated/python/pusher.py http://127.0.0.1:8080

It prints what it sees, and exits 1 at the first thing that is not as it should be.
"""

from __future__ import annotations

import sys
import time

from fairque_master import Client
from fairque_master.api.default import (
    cancel_job,
    enqueue,
    enqueue_many,
    job_detail,
    job_result,
    retry_job,
)
from fairque_master.models import Done, ErrorBody, Job, JobCreated, JobInfo, JobsCreated, Success

client = Client(base_url=sys.argv[1], timeout=10)


def check(what: str, holds: bool) -> None:
    print(f"{'ok' if holds else 'NOT OK'}: {what}", flush=True)
    if not holds:
        sys.exit(1)


def detail(job_id: str) -> JobInfo:
    info = job_detail.sync(job_id, client=client)
    assert isinstance(info, JobInfo), info
    return info


def ended(job_id: str, state: str, attempts: int = 0) -> JobInfo:
    """The job's detail once it is in ``state`` after ``attempts`` failed attempts."""
    deadline = time.monotonic() + 30
    while (info := detail(job_id)).state != state or info.attempts < attempts:
        if time.monotonic() > deadline:
            check(f"job {job_id} is {state} within 30 s (it is {info.state})", False)
        time.sleep(0.05)
    return info


one = enqueue.sync(client=client, body=Job(name="add", argument=[2, 3], keep_result=True))
check("a job is pushed", isinstance(one, JobCreated))
assert isinstance(one, JobCreated)
jobs = [Job(name="add", argument=[1, 2, 3]), Job(name="fail", argument="x", max_retry=0)]
batch = enqueue_many.sync(client=client, body=jobs)
check("a batch is pushed", isinstance(batch, JobsCreated) and len(batch.ids) == 2)
assert isinstance(batch, JobsCreated)

info = ended(one.id, "finished")
check("the worker reported progress", (info.progress, info.progress_message) == (100, "added"))
result = job_result.sync(one.id, client=client)
check("the result is read", isinstance(result, Success) and result.result == 5)
check("once", job_result.sync(one.id, client=client) is None)
check("the batch's first job ran", ended(batch.ids[0], "finished").state == "finished")

failed = ended(batch.ids[1], "failed", attempts=1)
check("a failure says why", failed.last_error == "fail fails with 'x'")
again = retry_job.sync(batch.ids[1], client=client)
check("a failed job is retried", isinstance(again, Done) and again.done)
check("and runs again", ended(batch.ids[1], "failed", attempts=2).attempts == 2)

waiting = enqueue.sync(client=client, body=Job(name="nobody-runs-this"))
assert isinstance(waiting, JobCreated)
canceled = cancel_job.sync(waiting.id, client=client)
check("a waiting job is canceled", isinstance(canceled, Done) and canceled.done)
check("and stays so", detail(waiting.id).state == "canceled")

bad = enqueue.sync_detailed(client=client, body=Job(name="", priority=2**40))
error = bad.parsed
check("a bad request is 400", bad.status_code == 400 and isinstance(error, ErrorBody))
assert isinstance(error, ErrorBody)
print(f"the error: {error.error}, field {error.field}: {error.message}", flush=True)
