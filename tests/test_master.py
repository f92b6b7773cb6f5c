"""The JQ master's HTTP API (seed 003), in-process against a real server."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient
from typer.testing import CliRunner

from fairque import FairQueue, QueueSettings
from fairque.cli import app as cli
from fairque.engine.embedded import LocalServer
from fairque.http.master import MasterConfig, create_master
from fairque.jobs import JobOutcome
from fairque.jobs.client import JobQueue
from tests.conftest import namespace_keys

pytestmark = pytest.mark.cluster

MSGPACK = {"content-type": "application/msgpack"}
OPENAPI_FILE = Path(__file__).parent.parent / "docs" / "openapi.json"
FAST = QueueSettings(retry_backoff_base=0.05, retry_backoff_max=0.05)


@pytest.fixture
def config(server: LocalServer, namespace: str) -> MasterConfig:
    return MasterConfig(url=server.url, namespace=namespace, settings=FAST, poll=0.05)


@pytest.fixture
def client(config: MasterConfig) -> Iterator[TestClient[Any]]:
    with TestClient(create_master(config)) as client:
        # Its first call writes the master's settings: the tests that compare the keys
        # before and after a refused request start after that.
        assert client.get("/overview").status_code == 200
        yield client


@pytest.fixture
def jobs(make_queue: Callable[..., FairQueue]) -> JobQueue:
    return JobQueue(make_queue(FAST))


def send(client: TestClient[Any], method: str, path: str, body: Any = None) -> Any:
    """Sends ``body`` as MessagePack; returns the decoded MessagePack answer."""
    content = None if body is None else msgspec.msgpack.encode(body)
    response = client.request(method, path, content=content, headers=MSGPACK)
    if not response.content:
        return response.status_code, None
    assert response.headers["content-type"].startswith("application/msgpack")
    return response.status_code, msgspec.msgpack.decode(response.content)


def test_enqueue_returns_an_id_and_the_job_can_be_read(client: TestClient[Any]) -> None:
    status, created = send(
        client, "POST", "/jobs", {"name": "resize", "argument": [1, {"a": b"x"}]}
    )
    assert status == 201
    status, detail = send(client, "GET", f"/jobs/{created['id']}")
    assert status == 200
    assert detail["name"] == "resize"
    assert detail["argument"] == [1, {"a": b"x"}]
    assert (detail["priority"], detail["max_retry"], detail["timeout"]) == (0, 0, 30.0)
    assert detail["state"] == "queued"
    assert detail["created_at"].endswith("Z") or "+00:00" in detail["created_at"]
    assert send(client, "GET", "/jobs/nope") == (
        404,
        {"error": "not_found", "message": "no task with id 'nope'", "field": None},
    )


def test_a_batch_is_enqueued_whole_or_not_at_all(
    client: TestClient[Any], server: LocalServer, namespace: str
) -> None:
    status, created = send(client, "POST", "/jobs/batch", [{"name": "a"}, {"name": "b"}])
    assert status == 201
    assert [send(client, "GET", f"/jobs/{i}")[1]["name"] for i in created["ids"]] == ["a", "b"]
    with FairQueue(server.url, namespace) as queue:
        before = namespace_keys(queue.redis, namespace)
        for body, field in [
            ([{"name": "a"}, {"name": "b", "priority": 2**40}], "[1].priority"),
            ([{"name": "a"}, {"priority": 1}], "[1].name"),
            ([], "body"),
            ([{"name": "a"}] * 1001, "body"),
        ]:
            status, error = send(client, "POST", "/jobs/batch", body)
            assert (status, error["field"]) == (400, field)
        assert namespace_keys(queue.redis, namespace) == before


def test_json_is_accepted_and_returned_when_asked(client: TestClient[Any]) -> None:
    response = client.post(
        "/jobs", json={"name": "n", "priority": -3}, headers={"accept": "application/json"}
    )
    assert response.status_code == 201
    assert response.headers["content-type"].startswith("application/json")
    job_id = response.json()["id"]
    detail = client.get(f"/jobs/{job_id}", headers={"accept": "application/json"}).json()
    assert detail["priority"] == -3


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "n", "priority": 2**31}, "priority"),
        ({"name": "n", "priority": -(2**31) - 1}, "priority"),
        ({"name": "n", "timeout": -1}, "timeout"),
        ({"name": "n", "timeout": "soon"}, "timeout"),
        ({"name": "n", "max_retry": 1.5}, "max_retry"),
        ({"name": "n", "keep_result": [1]}, "keep_result"),
        ({"name": 5}, "name"),
        ({"priority": 1}, "name"),
        ({"name": "n", "colour": "red"}, "colour"),
    ],
)
def test_bad_jobs_get_a_4xx_naming_the_field_and_change_nothing(
    client: TestClient[Any], server: LocalServer, namespace: str, body: Any, field: str
) -> None:
    with FairQueue(server.url, namespace) as queue:
        before = namespace_keys(queue.redis, namespace)
        status, error = send(client, "POST", "/jobs", body)
        assert status == 400
        assert error["error"] == "invalid_input"
        assert error["field"] == field, error
        assert namespace_keys(queue.redis, namespace) == before


@pytest.mark.parametrize(
    ("content", "headers", "status"),
    [
        (b"\xc1\xc1", MSGPACK, 400),  # 0xc1 is never valid MessagePack
        (b"\x92\x01", MSGPACK, 400),  # truncated array
        (b"{not json", {"content-type": "application/json"}, 400),
        (msgspec.msgpack.encode({"name": "n"}), {"content-type": "text/plain"}, 415),
        (msgspec.msgpack.encode({"name": "n"}), {}, 415),
        (msgspec.msgpack.encode({"name": "n", "argument": "x" * (3 << 20)}), MSGPACK, 413),
        (msgspec.msgpack.encode([1, 2]), MSGPACK, 400),
    ],
)
def test_malformed_bodies_get_a_4xx_and_change_nothing(  # noqa: PLR0917
    client: TestClient[Any],
    server: LocalServer,
    namespace: str,
    content: bytes,
    headers: dict[str, str],
    status: int,
) -> None:
    with FairQueue(server.url, namespace) as queue:
        before = namespace_keys(queue.redis, namespace)
        response = client.post("/jobs", content=content, headers=headers)
        assert response.status_code == status
        assert "message" in msgspec.msgpack.decode(response.content)
        assert namespace_keys(queue.redis, namespace) == before


def test_results_are_read_once(client: TestClient[Any], jobs: JobQueue) -> None:
    _, created = send(client, "POST", "/jobs", {"name": "n", "keep_result": True})
    [leased] = jobs.pop("w")
    done = {"type": "success", "finished_at": "2026-01-02T03:04:05Z", "result": [1]}
    jobs.complete(leased, msgspec.convert(done, JobOutcome))
    status, result = send(client, "GET", f"/jobs/{created['id']}/result")
    assert status == 200
    assert result == {"type": "success", "finished_at": "2026-01-02T03:04:05Z", "result": [1]}
    assert send(client, "GET", f"/jobs/{created['id']}/result") == (200, None)


def test_web_ui_api(client: TestClient[Any], jobs: JobQueue) -> None:
    ids = [send(client, "POST", "/jobs", {"name": "a", "priority": i})[1]["id"] for i in range(3)]
    _status, page = send(client, "GET", "/jobs?state=queued&name=a&limit=2")
    assert [job["id"] for job in page["jobs"]] == ids[:2]
    _, rest = send(client, "GET", f"/jobs?state=queued&name=a&cursor={page['cursor']}")
    assert ([job["id"] for job in rest["jobs"]], rest["cursor"]) == (ids[2:], 0)
    assert send(client, "POST", f"/jobs/{ids[0]}/cancel") == (200, {"done": True})
    assert send(client, "POST", f"/jobs/{ids[0]}/cancel") == (200, {"done": False})
    [leased] = jobs.pop("w")
    failed = {"type": "failure", "finished_at": "2026-01-01T00:00:00Z", "reason": "other",
              "should_retry": False, "message": "broke"}  # fmt: skip
    jobs.complete(leased, msgspec.convert(failed, JobOutcome))
    _, listed = send(client, "GET", "/jobs?state=failed")
    assert [job["id"] for job in listed["jobs"]] == [ids[1]]
    assert send(client, "POST", f"/jobs/{ids[1]}/retry") == (200, {"done": True})
    _, overview = send(client, "GET", "/overview")
    assert overview["states"]["queued"] == 2
    assert overview["counters"]["pushed"] == 3
    assert overview["workers"] == []
    assert send(client, "GET", "/jobs?state=lost")[0] == 400


def test_constraints_api(client: TestClient[Any]) -> None:
    constraint = {"match": [{"field": "name", "op": "in", "value": ["a", "b"]}], "rate": 5}
    assert send(client, "PUT", "/constraints/ab", constraint) == (200, {"moved": 0})
    status, listed = send(client, "GET", "/constraints")
    assert listed == [
        {
            "id": "ab",
            "constraint": {**constraint, "concurrency": None, "period": 1.0},
            "running": 0,
            "started": 0,
        }
    ]
    status, error = send(client, "PUT", "/constraints/ab", {"match": [], "rate": 0})
    assert (status, error["field"]) == (400, "rate")
    status, error = send(client, "PUT", "/constraints/bad!", constraint)
    assert status == 400
    assert send(client, "DELETE", "/constraints/ab")[0] == 204
    assert send(client, "GET", "/constraints") == (200, [])


def test_workers_register_heartbeat_and_leave(client: TestClient[Any]) -> None:
    registration = {"url": "http://127.0.0.1:9/", "names": ["a"], "capacity": 2}
    assert send(client, "PUT", "/workers/w1", registration) == (200, {"heartbeat": 5.0})
    _, workers = send(client, "GET", "/workers")
    assert [(w["id"], w["url"], w["names"], w["capacity"]) for w in workers] == [
        ("w1", "http://127.0.0.1:9", ["a"], 2)
    ]
    status, error = send(client, "PUT", "/workers/w1", {**registration, "url": "ftp://x"})
    assert (status, error["field"]) == (400, "url")
    assert send(client, "DELETE", "/workers/w1")[0] == 204
    assert send(client, "GET", "/workers") == (200, [])


def test_a_token_guards_every_route(config: MasterConfig) -> None:
    app = create_master(MasterConfig(**{**config.__dict__, "token": "s3cret"}))
    with TestClient(app) as client:
        for path in ("/overview", "/schema/openapi.json"):
            response = client.get(path)
            assert response.status_code == 401
            assert msgspec.msgpack.decode(response.content)["error"] == "unauthorized"
            assert client.get(path, headers={"authorization": "Bearer wrong"}).status_code == 401
            assert client.get(path, headers={"authorization": "Bearer s3cret"}).status_code == 200


def test_the_committed_openapi_document_is_in_sync() -> None:
    document = create_master().openapi_schema.to_schema()
    assert json.loads(OPENAPI_FILE.read_text()) == json.loads(json.dumps(document)), (
        "run: uv run fairque master --openapi docs/openapi.json"
    )
    job = document["paths"]["/jobs"]["post"]["requestBody"]["content"]
    assert set(job) == {"application/msgpack", "application/json"}


def test_the_openapi_document_is_served(client: TestClient[Any]) -> None:
    served = client.get("/schema/openapi.json").json()
    assert served["info"]["title"] == "fairque JQ master"
    assert "/jobs/{job_id}/result" in served["paths"]


def test_master_refuses_a_public_bind_without_a_token(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["master", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "token" in result.output
    target = tmp_path / "openapi.json"
    assert CliRunner().invoke(cli, ["master", "--openapi", str(target)]).exit_code == 0
    assert json.loads(target.read_text()) == json.loads(OPENAPI_FILE.read_text())
