"""A JQ master worker on clients generated from the OpenAPI documents, with no hand-written
HTTP or encoding: ``fairque_master`` (from ``docs/openapi.json``) registers it and reports
progress; ``fairque_worker`` (from ``docs/worker-openapi.json``) reads the jobs the master
sends to ``POST /run`` and writes the result objects. It registers in JSON, so the master
speaks JSON to it. Serves "add" (sums a list, reporting progress) and "fail" (always fails).

    mkdir generated
    openapi-python-client generate --path docs/openapi.json --meta none \\
        --output-path generated/fairque_master
    openapi-python-client generate --path docs/worker-openapi.json --meta none \\
        --output-path generated/fairque_worker
    PYTHONPATH=generated python examples/generated/python/worker.py http://127.0.0.1:8080 8090
"""

from __future__ import annotations

import json
import sys
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from fairque_master import Client
from fairque_master.api.default import register_worker, report_job
from fairque_master.models import JobReport, WorkerAck, WorkerRegistration
from fairque_worker.models import (
    Failure,
    FailureReason,
    FailureType,
    JobRequest,
    Success,
    SuccessType,
)

MASTER, PORT = sys.argv[1], int(sys.argv[2])
# With a master token: fairque_master.AuthenticatedClient(base_url=MASTER, token=...).
master = Client(base_url=MASTER, timeout=10)


def run(job: JobRequest) -> Success | Failure:
    """The result object of ``job``."""
    now = datetime.now(timezone.utc).isoformat()
    if job.name == "add" and isinstance(job.argument, list):
        report = JobReport(lease_token=job.lease_token, progress=100, message="added")
        report_job.sync(job.id, client=master, body=report)
        return Success(type_=SuccessType.SUCCESS, finished_at=now, result=sum(job.argument))
    return Failure(
        type_=FailureType.FAILURE, finished_at=now, reason=FailureReason.OTHER,
        should_retry=False, error=None, message=f"{job.name} fails with {job.argument!r}",
    )  # fmt: skip


class Worker(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # POST /run: one job in, one result object out
        sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        body = json.dumps(run(JobRequest.from_dict(sent)).to_dict()).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass  # no line per job


def heartbeat() -> None:
    """Registers, then again as often as the master asks (every second while it is away)."""
    me = WorkerRegistration(url=f"http://127.0.0.1:{PORT}", names=["add", "fail"], capacity=4)
    while True:
        try:
            answer = register_worker.sync(f"generated-python-{PORT}", client=master, body=me)
        except httpx.HTTPError as exc:  # the master is away
            print(f"worker.py: master unreachable ({exc})", file=sys.stderr, flush=True)
            answer = None
        time.sleep(answer.heartbeat if isinstance(answer, WorkerAck) else 1.0)


threading.Thread(target=heartbeat, daemon=True).start()
server = ThreadingHTTPServer(("127.0.0.1", PORT), Worker)
print(f"worker.py: serving add and fail at http://127.0.0.1:{PORT} for {MASTER} (Ctrl-C stops)",
      file=sys.stderr, flush=True)  # fmt: skip
server.serve_forever()
