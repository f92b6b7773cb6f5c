"""The whole seed 003 flow over real HTTP: a master, HTTP workers, a real server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import uvicorn
from litestar import Litestar, Request, Response, post
from litestar.datastructures import State
from litestar.response import Stream
from litestar.testing import TestClient
from typer.testing import CliRunner

import tests.http_tasks  # registers the task functions
from fairque import FairQueue, JobQueue, LeaseLost, QueueSettings
from fairque.cli import app as cli
from fairque.engine.records import MAX_LOG_LINE, MAX_LOG_LINES, MAX_PROGRESS_MESSAGE
from fairque.http.master import MasterConfig, create_master
from fairque.http.protocol import ResultFrames, result_frame
from fairque.http.worker import create_http_worker
from fairque.jobs import Job, Success
from fairque.runners.http_worker import HttpWorkerConfig
from fairque.servers.embedded import LocalServer, free_port
from fairque.worker import registry
from tests.conftest import namespace_keys, wait_for

MSGPACK = {"content-type": "application/msgpack", "accept": "application/msgpack"}
FAST = QueueSettings(retry_backoff_base=0.05, retry_backoff_max=0.05)
REPO = Path(__file__).parent.parent


@contextmanager
def serving(app: Litestar, port: int) -> Iterator[str]:
    """Serves ``app`` with uvicorn on a thread until the block ends."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_for(lambda: server.started)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


class Api:
    """A pusher: MessagePack over HTTP to the master."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, headers=MSGPACK, timeout=10)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        content = None if body is None else msgspec.msgpack.encode(body)
        response = self.http.request(method, path, content=content)
        assert response.status_code < 300, response.content
        return msgspec.msgpack.decode(response.content) if response.content else None

    def push(self, **job: Any) -> str:
        return str(self.call("POST", "/jobs", job)["id"])

    def ended(self, job_id: str) -> dict[str, Any]:
        """Waits until the job finished or failed; returns its detail."""

        def probe() -> dict[str, Any]:
            detail: dict[str, Any] = self.call("GET", f"/jobs/{job_id}")
            return detail if detail["state"] in ("finished", "failed") else {}

        return wait_for(probe, timeout=30)


@pytest.fixture
def master(server: LocalServer, namespace: str) -> Iterator[Api]:
    config = MasterConfig(
        url=server.url, namespace=namespace, settings=FAST, poll=0.05, heartbeat=0.5
    )
    with serving(create_master(config), free_port()) as url:
        api = Api(url)
        yield api
        api.http.close()


@contextmanager
def http_worker(master: Api, worker_id: str, capacity: int = 4) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = HttpWorkerConfig(str(master.http.base_url), url, worker_id, capacity)
    with serving(create_http_worker(config, registry), port):
        wait_for(lambda: any(w["id"] == worker_id for w in master.call("GET", "/workers")))
        yield url


def test_jobs_run_on_http_workers_and_results_come_back(master: Api) -> None:
    with http_worker(master, "w1"):
        echo = master.push(name="echo", argument={"args": [{"x": [1, 2]}]}, keep_result=True)
        boom = master.push(name="boom", max_retry=1, keep_result=True)
        quiet = master.push(name="echo", argument={"kwargs": {"value": 3}})
        assert master.ended(echo)["state"] == "finished"
        result = master.call("GET", f"/jobs/{echo}/result")
        assert (result["type"], result["result"]) == ("success", {"x": [1, 2]})
        assert master.call("GET", f"/jobs/{echo}/result") is None
        failed = master.ended(boom)
        assert (failed["state"], failed["attempts"]) == ("failed", 2)
        # Each attempt's error as the HTTP worker reported it, traceback and all.
        assert [(e["attempt"], e["worker_id"], e["type"]) for e in failed["errors"]] == [
            (1, "w1", "RuntimeError"), (2, "w1", "RuntimeError")
        ]  # fmt: skip
        assert "in boom\n    raise RuntimeError(message)" in failed["errors"][-1]["traceback"]
        result = master.call("GET", f"/jobs/{boom}/result")
        assert result["type"] == "failure"
        assert (result["reason"], result["message"]) == ("other", "RuntimeError: boom")
        assert master.ended(quiet)["state"] == "finished"
        assert master.call("GET", f"/jobs/{quiet}/result") is None
        overview = master.call("GET", "/overview")
        assert overview["counters"]["finished"] == 2
        assert [w["id"] for w in overview["workers"]] == ["w1"]
    # The worker unregisters when it stops.
    assert master.call("GET", "/workers") == []


def test_heartbeats_during_jobs_keep_the_running_count(master: Api) -> None:
    with http_worker(master, "w1", capacity=2):
        # Each job outlives a heartbeat (0.5 s): a re-registration must not lose count.
        jobs = [master.push(name="nap", argument={"args": [0.7]}) for _ in range(6)]
        for job in jobs:
            assert master.ended(job)["state"] == "finished"
        wait_for(lambda: master.call("GET", "/workers")[0]["running"] == 0)


def test_a_worker_gets_only_the_names_it_serves(master: Api) -> None:
    unknown = master.push(name="nobody-runs-this")
    with http_worker(master, "w1"):
        known = master.push(name="echo")
        master.ended(known)
        assert master.call("GET", f"/jobs/{unknown}")["state"] == "queued"


def test_unanswered_jobs_fail_as_timeouts(master: Api) -> None:
    @post("/run", status_code=200)
    async def silent() -> None:
        await asyncio.sleep(30)

    port = free_port()
    with serving(Litestar([silent]), port) as url:
        master.call("PUT", "/workers/silent", {"url": url, "names": ["echo"], "capacity": 1})
        job = master.push(name="echo", timeout=0.2, keep_result=True)
        assert master.ended(job)["last_error"] == "no result within 0.2 s"
        result = master.call("GET", f"/jobs/{job}/result")
        assert (result["type"], result["reason"], result["should_retry"]) == (
            "failure",
            "timeout",
            True,
        )


@pytest.mark.parametrize(
    ("answer", "status", "error"),
    [
        ({"type": "done"}, 200, "sent no valid result object"),
        ({"type": "success"}, 200, "sent no valid result object"),
        ({"type": "success", "finished_at": "2026-01-01T00:00:00Z"}, 500, "answered HTTP 500"),
    ],
)
def test_a_worker_answering_nonsense_fails_the_job(
    master: Api, answer: dict[str, Any], status: int, error: str
) -> None:
    @post("/run", status_code=status)
    async def nonsense() -> dict[str, Any]:
        return answer

    with serving(Litestar([nonsense]), free_port()) as url:
        master.call("PUT", "/workers/odd", {"url": url, "names": ["echo"], "capacity": 1})
        job = master.push(name="echo")
        assert error in master.ended(job)["last_error"]


def frames_worker(frames: Callable[[list[dict[str, Any]]], AsyncIterator[bytes]]) -> Litestar:
    """A worker app whose ``/runs`` answers with what ``frames`` yields for the jobs,
    and which records the ids of each request's jobs in ``app.state.requests``."""
    requests: list[list[str]] = []

    @post("/runs", status_code=200)
    async def runs(request: Request[Any, Any, Any]) -> Stream:
        jobs = msgspec.msgpack.decode(await request.body())
        requests.append([job["id"] for job in jobs])
        return Stream(frames(jobs), media_type="application/vnd.fairque.result-frames")

    return Litestar([runs], state=State({"requests": requests}))


def echoed(job: dict[str, Any]) -> Success:
    return Success(finished_at=datetime.now(timezone.utc), result=job["argument"])


@pytest.mark.one_engine
def test_jobs_leased_together_go_in_one_request_and_each_result_to_its_job(master: Api) -> None:
    async def last_first(jobs: list[dict[str, Any]]) -> AsyncIterator[bytes]:
        for position in reversed(range(len(jobs))):  # by position, not in order
            yield result_frame(position, echoed(jobs[position]))

    jobs = [master.push(name="echo", argument=n, keep_result=True) for n in range(3)]
    app = frames_worker(last_first)
    with serving(app, free_port()) as url:
        worker = {"url": url, "names": ["echo"], "capacity": 3, "batch": 3}
        master.call("PUT", "/workers/batcher", worker)
        for n, job in enumerate(jobs):
            assert master.ended(job)["state"] == "finished"
            assert master.call("GET", f"/jobs/{job}/result")["result"] == n
    assert app.state.requests == [jobs]


def json_worker() -> Litestar:
    """A worker that speaks JSON only (as one generated from worker-openapi.json): it
    records each request's Content-Type and Accept in ``app.state.requests``."""
    requests: list[tuple[str, str, str]] = []

    def outcome(job: dict[str, Any]) -> dict[str, Any]:
        now = datetime.now(timezone.utc).isoformat()
        if job["name"] == "echo":
            return {"type": "success", "finished_at": now, "result": job["argument"]}
        return {"type": "failure", "finished_at": now, "reason": "other", "error": None,
                "should_retry": False, "message": f"no {job['name']} here"}  # fmt: skip

    def answer(request: Request[Any, Any, Any], body: Any) -> Response[bytes]:
        headers = request.headers
        requests.append((request.url.path, headers["content-type"], headers["accept"]))
        return Response(json.dumps(body).encode(), media_type="application/json")

    @post("/run", status_code=200)
    async def run(request: Request[Any, Any, Any]) -> Response[bytes]:
        return answer(request, outcome(json.loads(await request.body())))

    @post("/runs", status_code=200)
    async def runs(request: Request[Any, Any, Any]) -> Response[bytes]:
        return answer(request, [outcome(job) for job in json.loads(await request.body())])

    return Litestar([run, runs], state=State({"requests": requests}))


@pytest.mark.one_engine
@pytest.mark.parametrize("batch", [1, 3])
def test_a_worker_registered_in_json_is_spoken_to_in_json(master: Api, batch: int) -> None:
    app = json_worker()
    jobs = [master.push(name="echo", argument={"n": n, "big": 2**63}, keep_result=True)
            for n in range(3)]  # fmt: skip
    failing = master.push(name="other")
    with serving(app, free_port()) as url:
        worker = {"url": url, "names": ["echo", "other"], "capacity": 4, "batch": batch}
        plain = {"content-type": "application/json", "accept": "*/*"}  # answered in kind
        registered = master.http.put("/workers/json", content=json.dumps(worker), headers=plain)
        assert registered.headers["content-type"].startswith("application/json")
        for n, job in enumerate(jobs):
            assert master.ended(job)["state"] == "finished"
            result = master.call("GET", f"/jobs/{job}/result")
            assert result["result"] == {"n": n, "big": 2**63}
        assert master.ended(failing)["last_error"] == "no other here"
    paths = {path for path, _, _ in app.state.requests}
    assert "/runs" in paths if batch > 1 else paths == {"/run"}
    assert {(kind, accept) for _, kind, accept in app.state.requests} == {
        ("application/json", "application/json")
    }


@pytest.mark.one_engine
def test_a_registration_may_name_its_media_type(master: Api) -> None:
    # Sent in MessagePack, saying JSON: the worker is spoken to in JSON.
    app = json_worker()
    job = master.push(name="echo", argument=[1], keep_result=True)
    with serving(app, free_port()) as url:
        worker = {"url": url, "names": ["echo"], "media_type": "application/json"}
        master.call("PUT", "/workers/named", worker)
        assert master.ended(job)["state"] == "finished"
    assert app.state.requests[0][1] == "application/json"
    status, error = send_raw(master, {**worker, "media_type": "text/plain"})
    assert (status, error["field"]) == (400, "media_type")


def send_raw(master: Api, registration: dict[str, Any]) -> tuple[int, Any]:
    response = master.http.put("/workers/raw", content=msgspec.msgpack.encode(registration))
    return response.status_code, msgspec.msgpack.decode(response.content)


@pytest.mark.one_engine
def test_a_fast_jobs_result_does_not_wait_for_a_slow_one_in_its_request(master: Api) -> None:
    slow = master.push(name="nap", argument={"args": [1.5]})
    fast = master.push(name="echo", argument={"args": [1]})
    with http_worker(master, "w1", capacity=2):  # both leased at once: one request
        assert master.ended(fast)["state"] == "finished"
        assert master.call("GET", f"/jobs/{slow}")["state"] == "started"
        assert master.ended(slow)["state"] == "finished"


@pytest.mark.one_engine
def test_each_job_of_a_request_times_out_on_its_own(master: Api) -> None:
    async def first_only(jobs: list[dict[str, Any]]) -> AsyncIterator[bytes]:
        yield result_frame(0, echoed(jobs[0]))
        await asyncio.sleep(30)

    patient = master.push(name="echo", argument="kept", timeout=30, keep_result=True)
    hasty = master.push(name="echo", timeout=0.3, max_retry=0)
    with serving(frames_worker(first_only), free_port()) as url:
        worker = {"url": url, "names": ["echo"], "capacity": 2, "batch": 2}
        master.call("PUT", "/workers/halfway", worker)
        assert master.ended(hasty)["last_error"] == "no result within 0.3 s"
        assert master.ended(patient)["state"] == "finished"


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


SUCCESS = {"type": "success", "finished_at": "2026-01-01T00:00:00Z", "result": None}
DEEP = msgspec.msgpack.encode(SUCCESS)[:-1] + b"\x91" * 200_000 + b"\xc0"  # result: [[[...]]]
ODD_RESULT = msgspec.msgpack.encode([1, {**SUCCESS, "result": msgspec.msgpack.Ext(1, b"")}])


@pytest.mark.one_engine
@pytest.mark.parametrize(
    ("answer", "error"),
    [
        ([], "sent no result for it"),
        ([frame(msgspec.msgpack.encode([5, SUCCESS]))], "sent no valid result frame: position 5"),
        ([frame(b"\xc1")], "sent no valid result frame"),
        ([frame(b"\x92\x01" + DEEP)], "sent no valid result frame: nested too deeply"),
        ([(2**31).to_bytes(4, "big")], "sent no valid result frame: a frame of 2147483648 bytes"),
        ([frame(ODD_RESULT)], "sent a result object not kept"),
        ([RuntimeError("the worker breaks off")], "failed: "),
    ],
)
def test_a_worker_answering_bad_frames_fails_those_jobs(
    master: Api, answer: list[bytes | Exception], error: str
) -> None:
    async def bad(jobs: list[dict[str, Any]]) -> AsyncIterator[bytes]:
        yield result_frame(0, echoed(jobs[0]))
        for piece in answer:
            if isinstance(piece, Exception):
                raise piece  # the server cuts the answer short
            yield piece

    good = master.push(name="echo")
    odd = master.push(name="echo", max_retry=0)
    with serving(frames_worker(bad), free_port()) as url:
        worker = {"url": url, "names": ["echo"], "capacity": 2, "batch": 2}
        master.call("PUT", "/workers/odd", worker)
        assert master.ended(good)["state"] == "finished"
        assert error in master.ended(odd)["last_error"]


@pytest.mark.one_engine
def test_a_worker_answering_an_error_to_a_batch_fails_its_jobs(master: Api) -> None:
    @post("/runs", status_code=503)
    async def busy() -> None:
        return None

    jobs = [master.push(name="echo", max_retry=0) for _ in range(2)]
    with serving(Litestar([busy]), free_port()) as url:
        worker = {"url": url, "names": ["echo"], "capacity": 2, "batch": 2}
        master.call("PUT", "/workers/busy", worker)
        for job in jobs:
            assert master.ended(job)["last_error"] == "worker busy answered HTTP 503"


def test_the_worker_times_out_its_own_functions(master: Api) -> None:
    with http_worker(master, "w1"):
        job = master.push(name="nap", argument={"args": [5]}, timeout=0.3, keep_result=True)
        master.ended(job)
        assert master.call("GET", f"/jobs/{job}/result")["reason"] == "timeout"


def test_a_worker_killed_mid_job_loses_nothing(master: Api, tmp_path: Path) -> None:
    port = free_port()
    marker = tmp_path / "started"
    command = [sys.executable, "-c", "from fairque.cli import main; main()", "http-worker",
               "--master", str(master.http.base_url), "--tasks", "tests.http_tasks",
               "--port", str(port), "--capacity", "1", "--worker-id", "doomed"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    doomed = subprocess.Popen(command, env=env, cwd=REPO)
    try:
        job = master.push(
            name="once-slow", argument={"args": [str(marker)]}, max_retry=2, keep_result=True
        )
        wait_for(marker.exists, timeout=30)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
        with http_worker(master, "rescuer"):
            detail = master.ended(job)
            assert (detail["state"], detail["attempts"]) == ("finished", 1)
            assert master.call("GET", f"/jobs/{job}/result")["result"] == "second run"
    finally:
        doomed.kill()
        doomed.wait(10)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}",  # nobody listens
        "http://\u0117Y\u00eb\u00cd\U000ec566\x9f\u00f2\U00058804\u023a",  # IDNA refuses it
    ],
)
def test_an_unreachable_worker_is_dropped_and_its_job_handed_back(master: Api, url: str) -> None:
    url = url.format(port=free_port())
    master.call("PUT", "/workers/ghost", {"url": url, "names": ["echo"], "capacity": 1})
    job = master.push(name="echo")
    wait_for(lambda: master.call("GET", "/workers") == [])
    # The worker leaves the list first; its job comes back with the next batch of results.
    wait_for(lambda: master.call("GET", f"/jobs/{job}")["state"] == "queued")
    assert master.call("GET", f"/jobs/{job}")["attempts"] == 0


@pytest.mark.one_engine
def test_an_unreachable_worker_hands_back_a_whole_batch(master: Api) -> None:
    jobs = [master.push(name="echo") for _ in range(3)]
    worker = {"url": f"http://127.0.0.1:{free_port()}", "names": ["echo"], "capacity": 3}
    master.call("PUT", "/workers/ghost", {**worker, "batch": 3})
    wait_for(lambda: master.call("GET", "/workers") == [])

    # Back with the next batch of results (the worker left the list first).
    def all_queued() -> bool:
        return all(master.call("GET", f"/jobs/{job}")["state"] == "queued" for job in jobs)

    wait_for(all_queued)
    assert [master.call("GET", f"/jobs/{job}")["attempts"] for job in jobs] == [0, 0, 0]


@pytest.mark.parametrize("name", ["counting", "counting_sync"])
def test_job_functions_report_progress_and_lines_through_the_master(
    master: Api, server: LocalServer, namespace: str, name: str
) -> None:
    with http_worker(master, "w1"):
        job_id = master.push(name=name, argument={"args": [3]})
        detail = master.ended(job_id)
    assert detail["state"] == "finished"
    with JobQueue(server.url, namespace) as jobs:
        info = jobs.get(job_id)
    assert info is not None
    assert info.progress_at is not None
    assert detail["progress_at"] == info.progress_at.isoformat().replace("+00:00", "Z")
    shown = (detail["progress"], detail["progress_message"], detail["logs"])
    assert shown == (info.progress, info.progress_message, list(info.logs))
    if name == "counting":
        assert shown == (100.0, "3 of 3", ["step 1", "step 2", "step 3"])
    else:
        assert shown[:2] == (3.0, "done")
        assert shown[2][-2:] == ["step 3", "and a second line"]
        assert len(shown[2]) == 6


def report(master: Api, job_id: str, **body: Any) -> tuple[int, Any]:
    response = master.http.post(f"/jobs/{job_id}/report", content=msgspec.msgpack.encode(body))
    return response.status_code, msgspec.msgpack.decode(response.content)


def test_a_report_needs_the_lease_and_is_bounded(
    master: Api, server: LocalServer, namespace: str
) -> None:
    with JobQueue(server.url, namespace) as jobs:  # no worker: the master leases nothing
        job_id = jobs.push(Job(name="resize"))
        [leased] = jobs.pop("by-hand")
        token = leased.lease_token
        flood = [f"line {n}" for n in range(MAX_LOG_LINES + 50)]
        assert report(master, job_id, lease_token=token, lines=flood) == (200, {"lines": 100})
        long = {"message": "m" * (MAX_PROGRESS_MESSAGE + 50), "lines": ["x" * 5000]}
        assert report(master, job_id, lease_token=token, progress=7, **long)[0] == 200
        for bad, field in (
            ({"lease_token": token, "progress": "7"}, "progress"),
            ({"lease_token": token, "progress": float("nan")}, "progress"),
            ({"lease_token": token, "lines": [1]}, "lines[0]"),
            ({"lease_token": token, "colour": "red"}, "colour"),
            ({"progress": 1}, "lease_token"),
        ):
            status, error = report(master, job_id, **bad)
            assert (status, error["error"], error["field"]) == (400, "invalid_input", field), bad
        refused = {"progress": 99, "message": "stolen", "lines": ["stolen"]}
        status, error = report(master, job_id, lease_token="1", **refused)
        assert (status, error["error"]) == (409, "lease_lost")
        jobs.complete(leased, Success(finished_at=datetime.now(timezone.utc)))
        status, error = report(master, job_id, lease_token=token, **refused)
        assert (status, error["error"]) == (409, "lease_lost")
    detail = master.call("GET", f"/jobs/{job_id}")
    assert (detail["state"], detail["progress"]) == ("finished", 7.0)
    assert detail["progress_message"] == "m" * MAX_PROGRESS_MESSAGE
    assert len(detail["logs"]) == MAX_LOG_LINES
    assert (detail["logs"][0], detail["logs"][-1]) == ("line 51", "x" * MAX_LOG_LINE)


def test_a_function_that_outlived_its_lease_is_refused(master: Api) -> None:
    tests.http_tasks.OUTLIVED_STARTED.clear()
    tests.http_tasks.OUTLIVED.clear()
    tests.http_tasks.LATE_REPORTS.clear()
    with http_worker(master, "w1"):
        # Its timeout bounds the master's request to the worker too: long enough for the
        # request to reach the worker on a busy machine, so that the run starts.
        job_id = master.push(name="outlived", timeout=1.0)
        wait_for(tests.http_tasks.OUTLIVED_STARTED.is_set)
        assert master.ended(job_id)["state"] == "failed"  # its lease ended with it
        tests.http_tasks.OUTLIVED.set()
        [refused] = wait_for(lambda: tests.http_tasks.LATE_REPORTS)
    assert isinstance(refused, LeaseLost)
    detail = master.call("GET", f"/jobs/{job_id}")
    assert (detail["progress"], detail["progress_message"]) == (None, None)


def test_a_job_without_a_lease_token_cannot_report(master: Api) -> None:
    """A job from a master that sends no lease token: the master refuses its reports."""
    job = {"id": "j", "name": "counting", "argument": {"args": [1]}, "priority": 0,
           "attempt": 1, "timeout": 5}  # fmt: skip
    with http_worker(master, "w1") as url:
        answer = httpx.post(f"{url}/run", content=msgspec.msgpack.encode(job), headers=MSGPACK)
    result = msgspec.msgpack.decode(answer.content)
    assert result["message"].startswith("InvalidInput: lease_token: "), result


def test_worker_app_runs_jobs_directly() -> None:
    config = HttpWorkerConfig(None, "http://127.0.0.1:1", "solo", 1)
    with TestClient(create_http_worker(config, registry)) as client:

        def run(**job: Any) -> Any:
            body = {"id": "j", "argument": None, "priority": 0, "attempt": 1, "timeout": 5, **job}
            response = client.post("/run", content=msgspec.msgpack.encode(body), headers=MSGPACK)
            return response.status_code, msgspec.msgpack.decode(response.content)

        status, result = run(name="echo", argument={"args": [4]})
        assert (status, result["type"], result["result"]) == (200, "success", 4)
        _, result = run(name="missing")
        assert (result["reason"], result["should_retry"]) == ("other", False)
        _, result = run(name="echo", argument=[1])
        assert result["should_retry"] is False
        status, error = run(name="echo", timeout="soon")
        assert (status, error["field"]) == (400, "timeout")
        _, result = run(name="counting", argument={"args": [1]})  # its report has no master
        assert result["message"] == "FairQueueError: this worker has no master to report to"


def test_worker_app_runs_a_batch_directly() -> None:
    config = HttpWorkerConfig(None, "http://127.0.0.1:1", "solo", 2)
    job = {"id": "j", "argument": None, "priority": 0, "attempt": 1, "timeout": 5}
    with TestClient(create_http_worker(config, registry)) as client:

        def runs(jobs: list[dict[str, Any]]) -> tuple[int, bytes]:
            response = client.post("/runs", content=msgspec.msgpack.encode(jobs), headers=MSGPACK)
            return response.status_code, response.content

        status, content = runs([{**job, "name": "nap", "argument": {"args": [0.2]}},
                                {**job, "name": "echo", "argument": {"args": [4]}}])  # fmt: skip
        assert status == 200
        frames = ResultFrames().feed(content)
        results = [msgspec.msgpack.decode(frame) for frame in frames]
        assert [(n, r["type"], r["result"]) for n, r in results] == [
            (1, "success", 4),  # the echo ended first
            (0, "success", 0.2),
        ]
        for jobs in ([], [job] * 1001, [{**job, "timeout": "soon"}]):
            status, content = runs(jobs)
            assert (status, msgspec.msgpack.decode(content)["error"]) == (400, "invalid_input")
        # Asked for JSON (a worker speaking JSON): the result objects, in the jobs' order.
        nap: dict[str, Any] = {**job, "name": "nap", "argument": {"args": [0.2]}}
        plain = [nap, {**job, "name": "echo", "argument": {"args": [4]}}]
        response = client.post("/runs", json=plain)
        assert response.headers["content-type"].startswith("application/json")
        assert [(r["type"], r["result"]) for r in response.json()] == [
            ("success", 0.2), ("success", 4)
        ]  # fmt: skip


def test_http_worker_refuses_a_public_bind_without_a_token() -> None:
    options = ["http-worker", "--master", "http://127.0.0.1:1", "--host", "0.0.0.0"]
    result = CliRunner().invoke(cli, options)
    assert result.exit_code == 2
    assert "token" in result.output


def test_the_example_worker_needs_only_http_and_msgpack(master: Api) -> None:
    port = free_port()
    example = [sys.executable, str(REPO / "examples" / "http_worker.py"),
               str(master.http.base_url), str(port)]  # fmt: skip
    worker = subprocess.Popen(example, stderr=subprocess.DEVNULL)
    try:
        job = master.push(name="add", argument=[1, 2, 39], keep_result=True)
        assert master.ended(job)["state"] == "finished"
        assert master.call("GET", f"/jobs/{job}/result")["result"] == 42
        bad = master.push(name="add", argument="x", keep_result=True)
        assert master.ended(bad)["last_error"] == "add takes a list"
    finally:
        worker.kill()
        worker.wait(10)


def test_with_a_token_master_and_worker_both_authenticate(
    server: LocalServer, namespace: str
) -> None:
    config = MasterConfig(
        url=server.url, namespace=namespace, poll=0.05, heartbeat=0.5, token="s3cret"
    )
    with serving(create_master(config), free_port()) as url:
        api = Api(url)
        api.http.headers["authorization"] = "Bearer s3cret"
        port = free_port()
        worker = HttpWorkerConfig(url, f"http://127.0.0.1:{port}", "sealed", 2, token="s3cret")
        with serving(create_http_worker(worker, registry), port) as worker_url:
            wait_for(lambda: api.call("GET", "/workers"))
            job = api.push(name="echo", argument={"args": [1]}, keep_result=True)
            assert api.ended(job)["state"] == "finished"
            assert api.call("GET", f"/jobs/{job}/result")["result"] == 1
            job_request = {"id": "j", "name": "echo", "argument": None, "priority": 0,
                           "attempt": 1, "timeout": 5}  # fmt: skip
            body = msgspec.msgpack.encode(job_request)
            refused = httpx.post(f"{worker_url}/run", content=body, headers=MSGPACK)
            assert refused.status_code == 401
        api.http.close()


def test_a_constraint_holds_for_jobs_in_every_state(
    server: LocalServer, namespace: str, tmp_path: Path
) -> None:
    # A long backoff keeps the retrying job scheduled while the constraint is created.
    settings = QueueSettings(retry_backoff_base=3.0, retry_backoff_max=3.0)
    config = MasterConfig(
        url=server.url, namespace=namespace, settings=settings, poll=0.05, heartbeat=0.5
    )
    tests.http_tasks.RUNS.clear()
    with serving(create_master(config), free_port()) as url:
        api = Api(url)

        def push(label: str, **options: Any) -> str:
            kwargs = {"label": label, **options.pop("kwargs", {})}
            return api.push(name="exclusive", argument={"kwargs": kwargs}, **options)

        def state(job_id: str) -> str:
            return str(api.call("GET", f"/jobs/{job_id}")["state"])

        with http_worker(api, "w1", capacity=2):
            failed = push("failed", kwargs={"fail_once": str(tmp_path / "failed")})
            assert api.ended(failed)["state"] == "failed"
            retrying = push("retrying", max_retry=1, kwargs={"fail_once": str(tmp_path / "r")})
            wait_for(lambda: state(retrying) == "scheduled")
            running = [push(f"running-{i}", kwargs={"seconds": 1.0}) for i in range(2)]
            wait_for(lambda: all(state(job) == "started" for job in running))
            queued = [push(f"queued-{i}", kwargs={"seconds": 0.05}) for i in range(3)]
            assert [state(job) for job in queued] == ["queued"] * 3  # both slots are taken
            only_one = {"match": [{"field": "name", "op": "equals", "value": "exclusive"}],
                        "concurrency": 1}  # fmt: skip
            assert api.call("PUT", "/constraints/one", only_one) == {"moved": 3}
            since = time.monotonic()
            assert api.call("GET", "/constraints")[0]["running"] == 2
            assert api.call("POST", f"/jobs/{failed}/retry") == {"done": True}
            for job in [*running, *queued, retrying, failed]:
                assert api.ended(job)["state"] == "finished"
        api.http.close()
    runs = list(tests.http_tasks.RUNS)
    # A job is "started" once leased: on a busy machine its function may begin after the
    # constraint was made, which is no run the constraint moved.
    later = [run for run in runs if run[1] > since and not run[0].startswith("running-")]
    assert len(later) == 5  # the queued ones, the retry, the failed one retried
    for label, start, _end in later:
        beside = [other for other, s, e in runs if other != label and s <= start < e]
        assert beside == [], f"{label} started while {beside} ran"


WHEN = "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(
    "answer",
    [
        {"type": "success", "finished_at": WHEN, "result": {"raw": b"\x00\xff", "n": [b""]}},
        {
            "type": "failure",
            "finished_at": WHEN,
            "reason": "other",
            "should_retry": False,
            "error": b"\x00\xff",
            "message": "broke",
        },
    ],
)
def test_a_workers_binary_values_come_back_exactly(master: Api, answer: dict[str, Any]) -> None:
    @post("/run", status_code=200)
    async def binary() -> Response[bytes]:
        return Response(msgspec.msgpack.encode(answer), media_type="application/msgpack")

    with serving(Litestar([binary]), free_port()) as url:
        master.call("PUT", "/workers/raw", {"url": url, "names": ["echo"], "capacity": 1})
        job = master.push(name="echo", keep_result=True)
        master.ended(job)
        # A failure's fields past 003's object come back with their defaults.
        extra = {"error_type": "", "traceback": ""} if answer["type"] == "failure" else {}
        assert master.call("GET", f"/jobs/{job}/result") == answer | extra


def test_a_result_nobody_could_read_back_fails_the_job(master: Api) -> None:
    answer = {"type": "success", "finished_at": WHEN, "result": {None: msgspec.msgpack.Ext(1, b"")}}

    @post("/run", status_code=200)
    async def unreadable() -> Response[bytes]:
        return Response(msgspec.msgpack.encode(answer), media_type="application/msgpack")

    with serving(Litestar([unreadable]), free_port()) as url:
        master.call("PUT", "/workers/odd", {"url": url, "names": ["echo"], "capacity": 1})
        job = master.push(name="echo", keep_result=True)
        detail = master.ended(job)
        assert detail["state"] == "failed"
        assert "sent a result object not kept: result: has a map key None" in detail["last_error"]
        assert master.call("GET", f"/jobs/{job}")["argument"] is None  # still readable


@pytest.mark.one_engine
def test_a_burst_of_requests_waits_for_connections_instead_of_failing(master: Api) -> None:
    async def burst() -> list[int]:
        unbounded = httpx.Limits(max_connections=None)
        base = str(master.http.base_url)
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=unbounded) as http:
            requests = [http.get("/overview", headers=MSGPACK) for _ in range(300)]
            return [response.status_code for response in await asyncio.gather(*requests)]

    # More requests at once than the connection pool holds (100): they queue for one.
    assert asyncio.run(burst()) == [200] * 300


def test_a_sharded_master_runs_the_jobs_of_every_shard(server: LocalServer, namespace: str) -> None:
    """``fairque master --shards 3``: jobs go to their names' shards (echo, boom and
    exclusive are on shards 2, 1 and 0), and the API covers them all."""
    config = MasterConfig(url=server.url, namespace=namespace, shards=3, settings=FAST,
                          poll=0.05, heartbeat=0.5)  # fmt: skip
    with serving(create_master(config), free_port()) as url:
        master = Api(url)
        with http_worker(master, "w1"):
            ids = [
                master.push(name="echo", argument={"args": [1]}, keep_result=True),
                master.push(name="boom"),
                *master.call("POST", "/jobs/batch", [
                    {"name": "exclusive", "argument": {"args": ["x"]}}, {"name": "echo"},
                ])["ids"],
            ]  # fmt: skip
            states = [master.ended(job_id)["state"] for job_id in ids]
            assert states == ["finished", "failed", "finished", "finished"]
            assert master.call("GET", f"/jobs/{ids[0]}/result")["result"] == 1
            finished = master.call("GET", "/jobs?state=finished&limit=10")
            assert sorted(job["id"] for job in finished["jobs"]) == sorted(ids[:1] + ids[2:])
            assert master.call("POST", f"/jobs/{ids[1]}/retry") == {"done": True}
            assert master.ended(ids[1])["state"] == "failed"
            overview = master.call("GET", "/overview")
            assert (overview["counters"]["finished"], overview["states"]["failed"]) == (3, 1)
        master.http.close()
    with FairQueue(server.url, namespace) as queue:
        for shard in range(3):
            assert namespace_keys(queue.redis, f"{namespace}:{shard}")
