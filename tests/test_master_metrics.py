"""The JQ master's ``/metrics``: requests by route and status, their latency, jobs by
state, HTTP workers; guarded by the master's token as its API is."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient
from prometheus_client.parser import text_string_to_metric_families

from fairque.http.master import MasterConfig, create_master
from fairque.servers.embedded import LocalServer, free_port

pytestmark = pytest.mark.one_engine  # the HTTP layer: the same on every engine

MSGPACK = {"content-type": "application/msgpack"}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, by name and sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_the_master_counts_its_requests_and_jobs(server: LocalServer, namespace: str) -> None:
    config = MasterConfig(url=server.url, namespace=namespace)
    with TestClient(create_master(config)) as client:
        body = msgspec.msgpack.encode({"name": "report", "argument": [1]})
        created = client.post("/jobs", content=body, headers=MSGPACK)
        assert created.status_code == 201
        job_id = msgspec.msgpack.decode(created.content)["id"]
        assert client.get(f"/jobs/{job_id}").status_code == 200
        assert client.get("/jobs/no-such-job").status_code == 404
        # A worker of another name: the job stays queued.
        registration = {"url": "http://127.0.0.1:9/", "names": ["other"], "capacity": 1}
        put = client.put("/workers/w1", content=msgspec.msgpack.encode(registration),
                         headers=MSGPACK)  # fmt: skip
        assert put.status_code == 200
        response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    seen = samples(response.text)
    requests = "fairque_master_http_requests_total"
    job_route = (("method", "GET"), ("route", "/jobs/{job_id}"))
    assert seen[requests, (("method", "POST"), ("route", "/jobs"), ("status", "201"))] == 1
    assert seen[requests, (*job_route, ("status", "200"))] == 1
    assert seen[requests, (*job_route, ("status", "404"))] == 1
    latency = "fairque_master_http_request_duration_seconds_count"
    assert seen[latency, job_route] == 2
    jobs = "fairque_master_jobs"
    assert seen[jobs, (("namespace", namespace), ("state", "queued"))] == 1
    assert seen[jobs, (("namespace", namespace), ("state", "finished"))] == 0
    assert seen["fairque_master_workers", ()] == 1


def test_metrics_ask_for_the_token_and_probes_do_not(server: LocalServer) -> None:
    app = create_master(MasterConfig(url=server.url, token="s3cret"))
    with TestClient(app) as client:
        assert client.get("/metrics").status_code == 401
        wrong: Any = {"authorization": "Bearer wrong"}
        assert client.get("/metrics", headers=wrong).status_code == 401
        right = client.get("/metrics", headers={"authorization": "Bearer s3cret"})
        assert right.status_code == 200
        assert "fairque_master_jobs{" in right.text
        assert client.get("/livez").status_code == 200


def test_without_its_server_the_master_still_serves_its_request_metrics() -> None:
    config = MasterConfig(url=f"redis://127.0.0.1:{free_port()}")  # nothing listens there
    with TestClient(create_master(config)) as client:
        assert client.get("/overview").status_code == 503
        response = client.get("/metrics")
    assert response.status_code == 200
    seen = samples(response.text)
    overview = (("method", "GET"), ("route", "/overview"), ("status", "503"))
    assert seen["fairque_master_http_requests_total", overview] == 1
    assert not any(name == "fairque_master_jobs" for name, _ in seen)
