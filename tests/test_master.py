"""The JQ master's HTTP API (seed 003), in-process against a real server."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient
from msgspec.msgpack import Ext
from typer.testing import CliRunner

from fairque import FairQueue, QueueSettings
from fairque.cli import app as cli
from fairque.errors import InvalidInput
from fairque.http.master import MasterConfig, create_master
from fairque.http.openapi import openapi_document
from fairque.http.worker import worker_api
from fairque.jobs import Job, JobOutcome
from fairque.jobs.client import JobQueue
from fairque.servers.embedded import LocalServer
from tests.conftest import namespace_keys, wait_for

pytestmark = pytest.mark.cluster

MSGPACK = {"content-type": "application/msgpack"}
OPENAPI_FILE = Path(__file__).parent.parent / "docs" / "openapi.json"
WORKER_OPENAPI_FILE = OPENAPI_FILE.with_name("worker-openapi.json")
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


def decoded(response: Any) -> Any:
    """A response's body, decoded as its Content-Type says (MessagePack or JSON)."""
    if response.headers["content-type"].startswith("application/msgpack"):
        return msgspec.msgpack.decode(response.content)
    assert response.headers["content-type"].startswith("application/json")
    return msgspec.json.decode(response.content)


def nested(levels: int) -> Any:
    """``levels`` arrays, one inside the other."""
    value: Any = None
    for _ in range(levels):
        value = [value]
    return value


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


@pytest.mark.one_engine  # validated at the edge: the same on every engine
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
        # Strict types: nothing is coerced (issue 15).
        ({"name": "n", "priority": "7"}, "priority"),
        ({"name": "n", "priority": 3.0}, "priority"),  # a MessagePack float
        ({"name": "n", "max_retry": "3"}, "max_retry"),
        ({"name": "n", "keep_result": "true"}, "keep_result"),
        ({"name": "n", "keep_result": 1}, "keep_result"),
        ({"name": "n", "timeout": "9"}, "timeout"),
        ({"name": ""}, "name"),
        ({"name": "a\x00b"}, "name"),
        # Values a reader could not get back as sent.
        ({"name": "n", "argument": Ext(1, b"x")}, "argument"),
        (
            {"name": "n", "argument": {"at": datetime(2026, 1, 1, tzinfo=timezone.utc)}},
            "argument.at",
        ),
        ({"name": "n", "argument": [1, {"deep": nested(101)}]}, "argument"),
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


@pytest.mark.one_engine  # validated at the edge: the same on every engine
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
        assert "message" in decoded(response)
        assert namespace_keys(queue.redis, namespace) == before


JOB = b"\x82\xa4name\xa1n\xa8argument"  # MessagePack {"name": "n", "argument": ...


BATCH = msgspec.msgpack.encode([{"name": "a"}, {"name": "b", "argument": {"x": Ext(5, b"")}}])


@pytest.mark.one_engine  # validated at the edge: the same on every engine
@pytest.mark.parametrize(
    ("path", "content", "kind", "field"),
    [
        ("/jobs", b"\x81\xa4name\xa2\xff\xfe", "msgpack", "body"),  # a str that is not UTF-8
        ("/jobs", JOB + b"\x91" * 1000 + b"\xc0", "msgpack", "body"),  # 1,000 levels
        (
            "/jobs",
            b'{"name": "n", "argument": ' + b"[" * 1000 + b"]" * 1000 + b"}",
            "json",
            "body",
        ),
        ("/jobs", JOB + b"\x91" * 150 + b"\xc0", "msgpack", "argument"),  # over MAX_DEPTH
        ("/jobs", JOB + b"\x81\xc0\x01", "msgpack", "argument"),  # {nil: 1}
        ("/jobs", JOB + b"\x81\xc3\x01", "msgpack", "argument"),  # {true: 1}
        ("/jobs", JOB + b"\x81\x91\x01\x01", "msgpack", "argument"),  # {[1]: 1}
        ("/jobs/batch", BATCH, "msgpack", "[1].argument.x"),
    ],
)
def test_unreadable_bodies_get_a_400_naming_what_is_wrong(  # noqa: PLR0917
    client: TestClient[Any],
    server: LocalServer,
    namespace: str,
    path: str,
    content: bytes,
    kind: str,
    field: str,
) -> None:
    with FairQueue(server.url, namespace) as queue:
        before = namespace_keys(queue.redis, namespace)
        response = client.post(
            path, content=content, headers={"content-type": f"application/{kind}"}
        )
        assert response.status_code == 400, response.content
        # Without an Accept, the answer is in the type the request was sent in.
        assert response.headers["content-type"].startswith(f"application/{kind}")
        error = decoded(response)
        assert error["error"] == "invalid_input"
        assert error["field"].startswith(field), error
        assert namespace_keys(queue.redis, namespace) == before


def test_json_numbers_without_a_fraction_are_integers(client: TestClient[Any]) -> None:
    # JSON has one number type; JSON Schema reads 3.0 as the integer 3. (In MessagePack a
    # float is a type of its own, refused where an integer is expected: see above.)
    response = client.post("/jobs", json={"name": "n", "priority": 3.0, "argument": [2.0, 2.5]})
    assert response.status_code == 201
    detail = send(client, "GET", f"/jobs/{decoded(response)['id']}")[1]
    assert (detail["priority"], detail["argument"]) == (3, [2, 2.5])
    assert client.post("/jobs", json={"name": "n", "priority": 3.5}).status_code == 400
    # 1e300 has no fraction either, but no 64-bit integer holds it: it stays a float, as
    # a JavaScript client's large numbers are. An integer field refuses it.
    response = client.post("/jobs", json={"name": "n", "argument": [1e300, -1e20]})
    assert response.status_code == 201
    detail = send(client, "GET", f"/jobs/{decoded(response)['id']}")[1]
    assert detail["argument"] == [1e300, -1e20]
    assert all(isinstance(number, float) for number in detail["argument"])
    assert client.post("/jobs", json={"name": "n", "priority": 1e300}).status_code == 400


def test_values_round_trip_exactly(client: TestClient[Any], jobs: JobQueue) -> None:
    argument = {"bin": b"\x00\xff", 7: [1.5, -(2**63), 2**64 - 1, None, True], b"k": {"x": ""}}
    _, created = send(client, "POST", "/jobs", {"name": "n", "argument": argument,
                                                 "keep_result": True})  # fmt: skip
    job_id = created["id"]
    assert send(client, "GET", f"/jobs/{job_id}")[1]["argument"] == argument
    # Every reader gets it: JSON (binary as base64) and the Web UI's task page.
    for path in (f"/jobs/{job_id}", f"/ui/api/tasks/{job_id}"):
        response = client.get(path, headers={"accept": "application/json"})
        assert response.status_code == 200, response.text
    [leased] = jobs.pop("w")
    assert leased.argument == argument
    done = msgspec.msgpack.encode(
        {"type": "success", "finished_at": "2026-01-02T03:04:05Z",
         "result": {"raw": b"\x00\xff", "n": [b"", 1]}}
    )  # fmt: skip
    jobs.complete(leased, msgspec.msgpack.decode(done, type=JobOutcome))
    _, result = send(client, "GET", f"/jobs/{job_id}/result")
    assert result["result"] == {"raw": b"\x00\xff", "n": [b"", 1]}


def test_a_result_that_cannot_be_read_back_is_refused(jobs: JobQueue) -> None:
    jobs.push(Job(name="n", keep_result=True))
    [leased] = jobs.pop("w")
    done = msgspec.msgpack.encode({"type": "failure", "finished_at": "2026-01-02T03:04:05Z",
                                   "reason": "other", "should_retry": False,
                                   "error": {"x": Ext(3, b"")}})  # fmt: skip
    with pytest.raises(InvalidInput) as refused:
        jobs.complete(leased, msgspec.msgpack.decode(done, type=JobOutcome))
    assert refused.value.field == "error.x"


def test_a_server_error_is_logged_and_labelled(
    client: TestClient[Any], server: LocalServer, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    _, created = send(client, "POST", "/jobs", {"name": "n"})
    with FairQueue(server.url, namespace) as queue:  # a record no reader can decode
        queue.redis.hset(queue.namespace.key(f"task:{created['id']}"), "payload", b"\xc1")
    with caplog.at_level(logging.ERROR, "fairque.http"):
        for accept, kind in (("application/msgpack", "msgpack"), ("application/json", "json")):
            response = client.get(f"/jobs/{created['id']}", headers={"accept": accept})
            assert response.status_code == 500
            assert response.headers["content-type"].startswith(f"application/{kind}")
            body = (msgspec.json if kind == "json" else msgspec.msgpack).decode(response.content)
            assert body["error"] == "server_error"
            reference = body["message"].rpartition("ref ")[2].rstrip(")")
            [record] = [r for r in caplog.records if reference in r.getMessage()]
            assert f"GET /jobs/{created['id']}" in record.getMessage()
            assert record.exc_info is not None  # the traceback


def test_results_are_read_once(client: TestClient[Any], jobs: JobQueue) -> None:
    _, created = send(client, "POST", "/jobs", {"name": "n", "keep_result": True})
    [leased] = jobs.pop("w")
    done = {"type": "success", "finished_at": "2026-01-02T03:04:05Z", "result": [1]}
    jobs.complete(leased, msgspec.convert(done, JobOutcome))
    status, result = send(client, "GET", f"/jobs/{created['id']}/result")
    assert status == 200
    assert result == {"type": "success", "finished_at": "2026-01-02T03:04:05Z", "result": [1]}
    assert send(client, "GET", f"/jobs/{created['id']}/result") == (200, None)
    # An id no job has is 404, as its detail is, not a result already read.
    for path in ("/jobs/no-such-job", "/jobs/no-such-job/result"):
        status, body = send(client, "GET", path)
        assert status == 404, path
        assert body["error"] == "not_found", body


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


@pytest.mark.one_engine  # the HTTP layer: the same on every engine
@pytest.mark.parametrize(
    ("accept", "content_type", "answer"),
    [
        (None, None, "json"),  # a generated client's GET: no Accept, no body
        (None, "application/json", "json"),  # a generated client's POST
        (None, "application/msgpack", "msgpack"),  # answered in the type it was sent in
        ("*/*", "application/x-msgpack", "msgpack"),
        ("application/json", "application/msgpack", "json"),
        ("application/msgpack", "application/json", "msgpack"),
        ("application/json, application/msgpack", None, "msgpack"),  # a tie: the fast path
        ("application/json;q=0.9, application/vnd.msgpack;q=0.5", None, "json"),
        ("application/msgpack;q=0, application/json", None, "json"),
        ("text/html, */*;q=0.8", "application/msgpack", "msgpack"),  # names neither
        ("application/json;q=oops, application/msgpack;q=0.1", None, "msgpack"),
    ],
)
def test_answers_are_in_the_type_the_client_prefers(
    client: TestClient[Any], accept: str | None, content_type: str | None, answer: str
) -> None:
    headers = {"accept": accept} if accept else {}
    if content_type:
        headers["content-type"] = content_type
        codec = msgspec.json if content_type.endswith("json") else msgspec.msgpack
        response = client.post("/jobs", content=codec.encode({"name": "n"}), headers=headers)
        assert response.status_code == 201
    else:
        response = client.get("/overview", headers=headers)
        assert response.status_code == 200
    assert response.headers["content-type"].startswith(f"application/{answer}")
    assert decoded(response)
    # An error is answered the same way.
    error = client.get("/jobs/nope", headers=headers)
    assert error.status_code == 404
    assert error.headers["content-type"] == response.headers["content-type"]


@pytest.mark.one_engine  # the HTTP layer: the same on every engine
def test_a_token_guards_every_route(config: MasterConfig) -> None:
    app = create_master(MasterConfig(**{**config.__dict__, "token": "s3cret"}))
    with TestClient(app) as client:
        for path in ("/overview", "/schema/openapi.json"):
            response = client.get(path)
            assert response.status_code == 401
            assert decoded(response)["error"] == "unauthorized"
            assert client.get(path, headers={"authorization": "Bearer wrong"}).status_code == 401
            assert client.get(path, headers={"authorization": "Bearer s3cret"}).status_code == 200


def test_the_committed_openapi_document_is_in_sync() -> None:
    document = openapi_document(create_master())
    # Byte for byte: the command writes the same document on every run.
    assert OPENAPI_FILE.read_text() == json.dumps(document, indent=2) + "\n", (
        "run: uv run fairque master --openapi docs/openapi.json"
    )
    job = document["paths"]["/jobs"]["post"]["requestBody"]["content"]
    assert set(job) == {"application/msgpack", "application/json"}


def test_the_committed_worker_openapi_document_is_in_sync() -> None:
    document = openapi_document(worker_api())
    assert WORKER_OPENAPI_FILE.read_text() == json.dumps(document, indent=2) + "\n", (
        "run: uv run fairque http-worker --openapi docs/worker-openapi.json"
    )
    run = document["paths"]["/run"]["post"]
    assert run["requestBody"]["content"]["application/msgpack"]["schema"] == {
        "$ref": "#/components/schemas/JobRequest"
    }
    answers = run["responses"]["200"]["content"]["application/msgpack"]["schema"]
    refs = {option.get("$ref") for option in answers["oneOf"]}
    assert refs == {"#/components/schemas/Success", "#/components/schemas/Failure"}
    # The master's document describes the same request as the webhook it sends.
    master = openapi_document(create_master())
    assert master["webhooks"] == {
        "run": document["paths"]["/run"],
        "runs": document["paths"]["/runs"],
    }
    for name in ("JobRequest", "Success", "Failure", "Value"):
        assert master["components"]["schemas"][name] == document["components"]["schemas"][name]


@pytest.mark.one_engine  # the HTTP layer: the same on every engine
def test_the_openapi_document_is_json_and_its_page_html(client: TestClient[Any]) -> None:
    response = client.get("/schema/openapi.json")
    assert response.headers["content-type"].startswith("application/json")
    served = response.json()
    assert served["info"]["title"] == "fairque JQ master"
    assert "/jobs/{job_id}/result" in served["paths"]
    assert served == json.loads(OPENAPI_FILE.read_text())
    page = client.get("/schema")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "<html" in page.text.lower()


@pytest.mark.one_engine  # the HTTP layer: the same on every engine
def test_bearer_auth_is_declared_only_with_a_token(config: MasterConfig) -> None:
    without = openapi_document(create_master(config))
    assert "security" not in without
    assert "securitySchemes" not in without["components"]
    sealed = MasterConfig(**{**config.__dict__, "token": "s3cret"})
    document = openapi_document(create_master(sealed))
    assert document["security"] == [{"bearer": []}]
    assert document["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


def test_the_schema_states_what_the_server_enforces() -> None:
    schemas = openapi_document(create_master())["components"]["schemas"]
    for name in ("Job", "WorkerRegistration", "Success", "Failure"):
        assert schemas[name]["additionalProperties"] is False, name
    assert schemas["Job"]["properties"]["name"]["minLength"] == 1
    assert "pattern" in schemas["Job"]["properties"]["name"]
    assert "pattern" in schemas["WorkerRegistration"]["properties"]["names"]["items"]
    # A constraint sets a limit: one whole object per limit (generators drop properties
    # written beside an anyOf), the limit set in each.
    constraints = schemas["Constraint"]["anyOf"]
    assert [(c["title"], c["required"]) for c in constraints] == [
        ("ConcurrencyConstraint", ["match", "concurrency"]),
        ("RateConstraint", ["match", "rate"]),
    ]
    assert all(c["additionalProperties"] is False for c in constraints)
    assert constraints[0]["properties"]["concurrency"]["type"] == "integer"  # not null
    # No default keyword: openapi-typescript would type the property as always present.
    period = constraints[1]["properties"]["period"]
    assert "default" not in period
    assert period["description"].endswith("Default: `1.0`.")
    variants = {
        option["properties"]["op"]["const"]: option["properties"]["value"].get("type")
        for option in schemas["Matcher"]["oneOf"]
    }
    assert variants == {"equals": None, "in": "array", "prefix": "string"}
    assert all(option["additionalProperties"] is False for option in schemas["Matcher"]["oneOf"])
    paths = openapi_document(create_master())["paths"]
    # A generated client names its functions by the operation ids: the handlers' names.
    ids = [op["operationId"] for item in paths.values() for op in item.values()]
    assert len(ids) == len(set(ids))
    assert {"enqueue", "jobDetail", "jobResult", "registerWorker", "uiOverview"} <= set(ids)
    batch = paths["/jobs/batch"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert (batch["minItems"], batch["maxItems"]) == (1, 1000)
    states = {p["name"]: p["schema"] for p in paths["/jobs"]["get"]["parameters"]}["state"]
    assert set(states["enum"]) == {
        "queued", "scheduled", "started", "finished", "failed", "canceled"
    }  # fmt: skip


def test_unsupported_methods_get_405_with_allow(client: TestClient[Any]) -> None:
    response = client.request("PATCH", "/constraints/c1")
    assert response.status_code == 405
    assert set(response.headers["allow"].split(", ")) == {"PUT", "DELETE", "OPTIONS"}
    assert decoded(response)["error"] == "method_not_allowed"
    # OPTIONS lists every method of the path, not only those of one handler.
    options = client.options("/jobs")
    assert set(options.headers["allow"].split(", ")) == {"GET", "POST", "OPTIONS"}


def test_master_refuses_a_public_bind_without_a_token(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["master", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "token" in result.output
    target = tmp_path / "openapi.json"
    assert CliRunner().invoke(cli, ["master", "--openapi", str(target)]).exit_code == 0
    assert json.loads(target.read_text()) == json.loads(OPENAPI_FILE.read_text())


def test_while_the_server_is_away_the_master_answers_503_and_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    own = LocalServer()  # not started yet: unreachable when the master starts
    config = MasterConfig(url=own.url, namespace="away", poll=0.05)

    def outages() -> list[str]:
        return [r.getMessage() for r in caplog.records if "is unreachable" in r.getMessage()]

    try:
        with caplog.at_level(logging.INFO, "fairque"), TestClient(create_master(config)) as client:
            assert len(outages()) == 1  # said at start
            for _ in range(3):
                response = client.post("/jobs", content=msgspec.msgpack.encode({"name": "n"}),
                                       headers=MSGPACK)  # fmt: skip
                assert response.status_code == 503
                assert response.headers["retry-after"] == "1"
                error = msgspec.msgpack.decode(response.content)
                assert error["error"] == "unavailable"
                assert own.url in error["message"]
            own.start()
            wait_for(lambda: client.get("/overview").status_code == 200)
            wait_for(lambda: "answers again" in caplog.text)
            assert send(client, "POST", "/jobs", {"name": "n"})[0] == 201
            # Later: the server goes away and comes back while the master runs.
            own.stop()
            for path in ("/overview", "/jobs?state=queued", "/ui/api/overview"):
                assert client.get(path).status_code == 503
            own.start()
            wait_for(lambda: client.get("/overview").status_code == 200)
            # The dispatcher's next round (every poll, 0.05 s) says so, not the request.
            wait_for(lambda: caplog.text.count("answers again") == 2)
        assert len(outages()) == 2  # one line per outage, not one per request
        assert caplog.text.count("answers again") == 2
    finally:
        own.close()
