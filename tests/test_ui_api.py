"""The Web UI's data routes (/ui/api) and page, in-process against a real server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

import httpx
import msgspec
import pytest
from litestar.testing import TestClient
from typer.testing import CliRunner

from fairque import FairQueue, Priority, QueueSettings, ShardedQueue, Task
from fairque.cli import app as cli
from fairque.engine.fields import SHARES
from fairque.http.master import MasterConfig, create_master
from fairque.http.ui import CSP, DashboardConfig, UiConfig, create_dashboard
from fairque.http.ui_bodies import Throughput
from fairque.jobs import Constraint, Job, Matcher, Success
from fairque.jobs.client import JobQueue
from fairque.queue import WorkerInfo
from fairque.runners.scheduler import TaskScheduler
from fairque.servers.embedded import LocalServer, free_port
from tests.conftest import namespace_keys, wait_for
from tests.test_http_workers import serving

JSON = {"accept": "application/json"}


@pytest.fixture
def client(server: LocalServer, namespace: str) -> Iterator[TestClient[Any]]:
    config = MasterConfig(url=server.url, namespace=namespace, poll=0.05)
    with TestClient(create_master(config)) as client:
        yield client


def get(client: TestClient[Any], path: str, status: int = 200) -> Any:
    response = client.get(f"/ui/api{path}", headers=JSON)
    assert response.status_code == status, response.text
    return response.json()


def post(client: TestClient[Any], path: str, status: int = 200) -> Any:
    response = client.post(f"/ui/api{path}", headers=JSON)
    assert response.status_code == status, response.text
    return response.json()


def test_overview_counts_states_tenants_and_throughput(
    server: LocalServer, namespace: str, queue: FairQueue
) -> None:
    config = DashboardConfig(UiConfig(server.url, namespace, sample_every=0.05))
    with TestClient(create_dashboard(config)) as client:
        queue.push_many([Task(user_id="heavy") for _ in range(6)] + [Task(user_id="light")])
        for task in queue.pop(count=3):
            queue.finish(task)

        overview = wait_for(lambda: (o := get(client, "/overview"))["throughput"] and o)
        assert overview["namespace"] == namespace
        assert overview["states"]["queued"] == 4
        assert overview["states"]["finished"] == 3
        # The busiest tenants: those with ready tasks (light's one task was popped).
        assert [t["user_id"] for t in overview["tenants"]] == ["heavy"]
        assert overview["tenants_with_ready"] == 1
        assert overview["tenants"][0]["queued"] + overview["tenants"][0]["finished"] >= 5
        assert get(client, "/tenants") == {"tenants": overview["tenants"], "cursor": 0}
        light = get(client, "/tenants/light")  # not ranked (nothing ready), found by name
        assert (light["user_id"], light["queued"], light["pushed"]) == ("light", 0, 1)
        assert get(client, "/tenants/" + "x" * 300, 400)["field"] == "user_id"
        rate = overview["throughput"][-1]
        assert set(rate) == {"at", "pushed", "finished", "failed"}
        # MessagePack for a client that asks for it, like the rest of the API.
        raw = client.get("/ui/api/tenants", headers={"accept": "application/msgpack"})
        assert msgspec.msgpack.decode(raw.content)["tenants"] == overview["tenants"]


def test_a_sharded_namespace_shows_every_shard(server: LocalServer, namespace: str) -> None:
    config = DashboardConfig(UiConfig(server.url, namespace, shards=3))
    with (
        ShardedQueue(server.url, namespace, shards=3) as sharded,
        TestClient(create_dashboard(config)) as client,
    ):
        ids = sharded.push_many([Task(user_id=f"tenant-{n}") for n in range(12)])
        overview = get(client, "/overview")
        assert overview["states"]["queued"] == 12
        assert len(overview["tenants"]) == 12
        listed = get(client, "/tasks?state=queued&limit=100")
        while listed["cursor"]:  # a page per shard at most
            more = get(client, f"/tasks?state=queued&limit=100&cursor={listed['cursor']}")
            listed = {"tasks": listed["tasks"] + more["tasks"], "cursor": more["cursor"]}
        assert sorted(task["task_id"] for task in listed["tasks"]) == sorted(ids)
        detail = get(client, f"/tasks/{ids[-1]}")
        assert detail["task"]["user_id"] == "tenant-11"


def test_throughput_rates_are_per_second_and_skip_equal_times() -> None:
    samples = Throughput()
    for at, finished in ((10.0, 0), (10.0, 5), (12.0, 9), (14.0, 9)):
        samples.record(at, {"finished": finished, "pushed": 20}, keep=3)
    assert [(r.at, r.finished, r.pushed) for r in samples.rates()] == [
        (12.0, 2.0, 0.0),
        (14.0, 0, 0),
    ]


def test_task_pages_detail_and_dependencies(client: TestClient[Any], queue: FairQueue) -> None:
    parent = queue.push(Task(user_id="alice", task_id="parent", payload={"html": "<b>x</b>"}))
    child = queue.push(Task(user_id="alice", task_id="child", depends_on=(parent,)))
    queue.push_many([Task(user_id="bob", name="report", priority=Priority.HIGH) for _ in range(3)])

    page = get(client, "/tasks?state=queued&limit=2")
    assert [task["user_id"] for task in page["tasks"]] == ["bob", "bob"]  # the busiest first
    assert page["cursor"] == 2
    rest = get(client, f"/tasks?state=queued&cursor={page['cursor']}&limit=2")
    assert [task["user_id"] for task in rest["tasks"]] == ["bob", "alice"]
    assert rest["cursor"]  # full: there may be more (a place in the next tenant's queues)
    last = get(client, f"/tasks?state=queued&cursor={rest['cursor']}&limit=2")
    assert last == {"tasks": [], "cursor": 0}
    assert get(client, "/tasks?state=queued&user_id=alice")["tasks"][0]["task_id"] == parent
    assert len(get(client, "/tasks?state=queued&name=report")["tasks"]) == 3
    assert get(client, "/tasks?state=deferred")["tasks"][0]["task_id"] == child

    detail = get(client, f"/tasks/{parent}")
    assert detail["kind"] == "task"
    assert detail["task"]["payload"] == {"html": "<b>x</b>"}
    assert detail["task"]["dependents"] == [child]
    assert get(client, f"/tasks/{child}")["task"]["blocked_by"] == [parent]
    assert get(client, "/tasks/nope", 404)["error"] == "not_found"


def test_failed_rows_carry_their_last_error(client: TestClient[Any], queue: FairQueue) -> None:
    # One error longer than the page shows: the whole text comes back.
    queue.push_many([Task(user_id="alice", task_id=f"a{n}", max_retries=0) for n in range(30)])
    errors = {f"a{n}": f"boom {n}" for n in range(30)}
    errors["a7"] = "Traceback (most recent call last):\n" + "  frame\n" * 300 + "ValueError: x"
    for task in queue.pop(count=30):
        queue.fail(task, errors[task.task_id])
    queue.push(Task(user_id="bob", task_id="retried"))
    (again,) = queue.pop()
    queue.fail(again, "first try failed")  # queued again for a retry, with an error

    failed = get(client, "/tasks?state=failed&limit=100")["tasks"]
    assert {row["task_id"]: row["last_error"] for row in failed} == errors  # whole texts
    # A retry waiting out its backoff (or queued already) shows why its attempt failed.
    waiting = [
        (row["task_id"], row["last_error"])
        for state in ("scheduled", "queued")
        for row in get(client, f"/tasks?state={state}")["tasks"]
    ]
    assert waiting == [("retried", "first try failed")]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("state=lost", "state"),
        ("limit=0", "limit"),
        ("cursor=-1", "cursor"),
        ("user_id=", "user_id"),
    ],
)
def test_bad_list_queries_name_the_field(client: TestClient[Any], query: str, field: str) -> None:
    assert get(client, f"/tasks?{query}", 400)["field"] == field


def test_jobs_show_as_jobs(client: TestClient[Any], queue: FairQueue) -> None:
    jobs = JobQueue(queue)
    job_id = jobs.push(Job(name="resize", argument=[1, 2], priority=-7))
    (row,) = get(client, "/tasks?state=queued")["tasks"]
    assert (row["task_id"], row["user_id"], row["priority"]) == (job_id, None, -7)
    detail = get(client, f"/tasks/{job_id}")
    assert (detail["kind"], detail["job"]["argument"]) == ("job", [1, 2])
    [leased] = jobs.pop("w1")
    jobs.report(job_id, leased.lease_token, 25.0, "a quarter", ["first line"])
    job = get(client, f"/tasks/{job_id}")["job"]
    assert (job["progress"], job["progress_message"], job["logs"]) == (
        25.0,
        "a quarter",
        ["first line"],
    )
    assert job["progress_at"] is not None


def test_a_jobs_kept_result_shows_and_stays_for_its_pusher(
    client: TestClient[Any], queue: FairQueue
) -> None:
    jobs = JobQueue(queue)
    job_id = jobs.push(Job(name="resize", keep_result=True))
    [leased] = jobs.pop("w1")
    jobs.complete(leased, Success(finished_at=datetime.now(timezone.utc), result={"w": 64}))
    for _ in range(2):  # shown each time, taken neither time
        shown = get(client, f"/tasks/{job_id}")["job_result"]
        assert (shown["type"], shown["result"]) == ("success", {"w": 64})
    taken = client.get(f"/jobs/{job_id}/result", headers=JSON)
    assert taken.json()["result"] == {"w": 64}  # the pusher's read, the one that takes it
    assert client.get(f"/jobs/{job_id}/result", headers=JSON).json() is None
    assert get(client, f"/tasks/{job_id}")["job_result"] is None


def test_retry_cancel_and_requeue_a_tenant(client: TestClient[Any], queue: FairQueue) -> None:
    queue.push_many([Task(user_id="alice", task_id=f"a{n}", max_retries=0) for n in range(3)])
    waiting = queue.push(Task(user_id="bob", task_id="b", delay=60))
    for task in queue.pop(count=3, worker_id="w-7"):
        queue.fail(task, "boom")
    assert post(client, "/tasks/a0/retry") == {"done": True}
    assert post(client, "/tasks/a0/retry") == {"done": False}
    assert post(client, "/tenants/alice/retry-failed") == {"requeued": 2}
    assert post(client, "/tenants/alice/retry-failed") == {"requeued": 0}
    assert get(client, "/overview")["states"]["queued"] == 3
    assert post(client, f"/tasks/{waiting}/cancel") == {"done": True}
    assert post(client, f"/tasks/{waiting}/cancel") == {"done": False}
    assert post(client, "/tasks/ghost/cancel", 404)["error"] == "not_found"
    [running] = queue.pop(count=1, worker_id="w-7")  # a0, queued again above
    assert post(client, f"/tasks/{running.task_id}/cancel") == {"done": True}  # aborted
    assert get(client, f"/tasks/{running.task_id}")["task"]["state"] == "canceled"


def test_workers_registered_or_holding_leases_and_http_workers(
    client: TestClient[Any], queue: FairQueue
) -> None:
    queue.push_many([Task(user_id="u") for _ in range(5)])
    unregistered = queue.pop(count=3, worker_id="host:42")
    busy = queue.pop(count=2, worker_id="busy-1")
    queue.register_worker(WorkerInfo("idle-1", "host-b", 7, ("report",), 5, 0, 1.7e9), ttl=60)
    queue.register_worker(WorkerInfo("busy-1", "host-c", 8, ("a", "b"), 4, 2, 1.7e9), ttl=60)
    registration = {"url": "http://127.0.0.1:9", "names": ["resize"], "capacity": 4}
    assert client.put("/workers/hw-1", json=registration).status_code == 200
    JobQueue(queue).push(Job(name="other"))
    assert JobQueue(queue).pop("hw-1")  # a lease of the HTTP worker: shown in its table only

    workers = get(client, "/workers")
    rows = {row["worker_id"]: row for row in workers["queue"]}
    assert list(rows) == ["busy-1", "host:42", "idle-1"]  # by id
    idle = rows["idle-1"]  # registered, runs nothing: listed all the same
    assert idle | {"seen_at": None} == {
        "worker_id": "idle-1",
        "registered": True,
        "host": "host-b",
        "pid": 7,
        "functions": ["report"],
        "concurrency": 5,
        "seen_at": None,
        "held": 0,
        "task_ids": [],
    }
    assert idle["seen_at"] > 1.7e9  # the server's clock at its beat
    held = rows["busy-1"]  # registered and holding leases: one row with both
    assert (held["host"], held["functions"], held["held"]) == ("host-c", ["a", "b"], 2)
    assert sorted(held["task_ids"]) == sorted(t.task_id for t in busy)
    lone = rows["host:42"]  # holds leases, not in the registry: its id and tasks only
    unknown = ("host", "pid", "concurrency", "seen_at")
    assert (lone["registered"], lone["functions"], lone["held"]) == (False, [], 3)
    assert [lone[key] for key in unknown] == [None] * len(unknown)
    assert sorted(lone["task_ids"]) == sorted(t.task_id for t in unregistered)
    assert [(w["id"], w["capacity"]) for w in workers["http"]] == [("hw-1", 4)]
    assert client.delete("/workers/hw-1").status_code == 204


def test_schedules_pause_and_resume(
    client: TestClient[Any], server: LocalServer, namespace: str
) -> None:
    with TaskScheduler(server.url, namespace) as scheduler:
        schedule_id = scheduler.add_schedule(interval=60, task={"name": "ping", "user_id": "ops"})
    (row,) = get(client, "/schedules")
    assert (row["schedule_id"], row["state"], row["task_name"]) == (schedule_id, "active", "ping")
    assert row["next_run"] is not None
    assert post(client, f"/schedules/{schedule_id}/pause") == {"state": "paused"}
    assert get(client, "/schedules")[0]["state"] == "paused"
    assert post(client, f"/schedules/{schedule_id}/resume") == {"state": "active"}
    assert post(client, "/schedules/ghost/pause", 404)["error"] == "http_error"
    assert post(client, "/schedules/ghost/resume", 404)["error"] == "http_error"


def test_constraints_show_their_use(client: TestClient[Any], queue: FairQueue) -> None:
    jobs = JobQueue(queue)
    jobs.set_constraint("slow", Constraint([Matcher("name", "equals", "resize")], concurrency=2))
    jobs.push(Job(name="resize"))
    jobs.pop("w")
    (status,) = get(client, "/constraints")
    assert (status["id"], status["running"], status["constraint"]["concurrency"]) == ("slow", 1, 2)


def test_the_page_loads_without_a_token_and_the_data_needs_one(
    server: LocalServer, namespace: str, make_queue: Callable[..., FairQueue]
) -> None:
    queue = make_queue(QueueSettings())
    queue.stats()  # the first call records the data format: what is there from then on
    before = namespace_keys(queue.redis, namespace)
    config = DashboardConfig(UiConfig(server.url, namespace), token="s3cret")
    with TestClient(create_dashboard(config)) as client:
        page = client.get("/ui")
        assert page.status_code == 200
        assert page.headers["content-security-policy"] == CSP
        assert "script-src 'self'" in CSP
        assert page.headers["x-content-type-options"] == "nosniff"
        assert '<script type="module" src="/ui/static/app.js">' in page.text
        # The dashboard's sign-in names its own token, not a master's.
        assert "master's" not in page.text
        assert "fairque dashboard" in page.text
        for asset in ("app.js", "api.js", "dom.js", "chart.js", "style.css"):
            served = client.get(f"/ui/static/{asset}")
            assert served.status_code == 200
            assert served.headers["x-content-type-options"] == "nosniff"
        assert client.get("/", follow_redirects=False).headers["location"] == "/ui"
        assert get(client, "/overview", 401)["error"] == "unauthorized"
        bearer = {**JSON, "authorization": "Bearer s3cret"}
        assert client.get("/ui/api/overview", headers=bearer).status_code == 200
        assert client.post("/ui/api/tasks/x/retry", headers=JSON).status_code == 401
    assert namespace_keys(queue.redis, namespace) == before


@pytest.mark.parametrize("token", [None, "s3cret"])
def test_the_page_learns_whether_a_token_is_needed(
    server: LocalServer, namespace: str, token: str | None
) -> None:
    """/ui/api/access answers without a token, on the master and the dashboard alike;
    the page shows a login form and Log out only when it says one is required."""
    master = create_master(MasterConfig(url=server.url, namespace=namespace, token=token))
    dashboard = create_dashboard(DashboardConfig(UiConfig(server.url, namespace), token=token))
    for app in (master, dashboard):
        with TestClient(app) as client:
            access = get(client, "/access")
            assert access["token_required"] == (token is not None)
            # The shares form is made of the server's field table.
            assert [field["name"] for field in access["shares"]] == [f.name for f in SHARES]
            assert access["shares"][0] == {
                "name": "weight", "kind": "int", "low": 1, "high": 1000,
                "help": SHARES[0].help,
            }  # fmt: skip
            get(client, "/tenants", 401 if token else 200)
    if token:
        document = master.openapi_schema.to_schema()
        assert document["security"] == [{"bearer": []}]
        assert document["paths"]["/ui/api/access"]["get"]["security"] == [{}]


def test_the_ui_routes_are_in_the_openapi_document(client: TestClient[Any]) -> None:
    paths = client.get("/schema/openapi.json").json()["paths"]
    assert {"/ui/api/tasks", "/ui/api/tenants/{user_id}/retry-failed"} <= set(paths)
    assert "/ui" not in paths


def test_dashboard_refuses_a_public_bind_without_a_token() -> None:
    result = CliRunner().invoke(cli, ["dashboard", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "token" in result.output


def test_the_throughput_chart_has_a_past_when_the_dashboard_starts(
    server: LocalServer, namespace: str, queue: FairQueue
) -> None:
    queue.push_many([Task(user_id="a") for _ in range(12)])
    queue.finish_many(queue.pop(count=12))
    # A dashboard that samples rarely: whatever it shows at once comes from the server.
    config = DashboardConfig(UiConfig(server.url, namespace, sample_every=3600))
    with TestClient(create_dashboard(config)) as client:
        rates = get(client, "/overview")["throughput"]
    assert rates
    assert any(rate["pushed"] > 0 and rate["finished"] > 0 for rate in rates)


def test_a_paused_tenant_is_named_paused_wherever_tenants_are_shown(
    client: TestClient[Any], queue: FairQueue
) -> None:
    queue.push_many([Task(user_id="acme") for _ in range(3)] + [Task(user_id="globex")])
    queue.set_tenant("globex", paused=True)
    queue.set_tenant("acme", weight=2)  # shares, but not paused
    queue.pop(count=4)  # acme's three: globex serves nothing, so no fairness row
    overview = get(client, "/overview")
    assert {t["user_id"]: t["paused"] for t in overview["tenants"]} == {"globex": True}
    assert [(t["tenant"], t["ready"]) for t in overview["paused"]] == [("globex", 1)]
    assert [t["paused"] for t in get(client, "/tenants")["tenants"]] == [True]
    assert (get(client, "/tenants/globex")["paused"], get(client, "/tenants/acme")["paused"]) == (
        True,
        False,
    )
    fairness = get(client, "/fairness")
    assert [row["tenant"] for row in fairness["tenants"]] == ["acme"]
    assert [t["tenant"] for t in fairness["paused"]] == ["globex"]
    queue.set_tenant("globex", paused=False)
    assert get(client, "/overview")["paused"] == get(client, "/fairness")["paused"] == []


def test_the_fairness_route_and_tenant_shares(client: TestClient[Any], queue: FairQueue) -> None:
    queue.push_many([Task(user_id="a") for _ in range(3)] + [Task(user_id="b")])
    queue.pop(count=4)
    view = get(client, "/fairness?minutes=2&top=1")
    assert (view["minutes"], view["starts"], view["other_starts"]) == (2, 4, 1)
    (row,) = view["tenants"]
    assert (row["tenant"], row["starts"], row["running"], row["weight"]) == ("a", 3, 3, 1)
    assert row["share"] == pytest.approx(0.75)
    assert len(view["history"]) == 2
    assert row["wait_p99"] >= row["wait_p50"] > 0
    assert get(client, "/fairness?minutes=11", 400)["field"] == "minutes"

    changed = client.put(
        "/ui/api/tenants/a/shares", headers=JSON, json={"weight": 3, "concurrency": 2}
    )
    assert changed.status_code == 200, changed.text
    assert (changed.json()["weight"], changed.json()["concurrency"]) == (3, 2)
    assert queue.tenant("a").weight == 3
    shown = get(client, "/tenants/a/shares")
    assert (shown["weight"], shown["running"], shown["servable"]) == (3, 3, False)
    # MessagePack bodies too, like every route of the API.
    packed = client.put(
        "/ui/api/tenants/a/shares",
        headers={**JSON, "content-type": "application/msgpack"},
        content=msgspec.msgpack.encode({"paused": True}),
    )
    assert packed.json()["paused"] is True


@pytest.mark.parametrize(
    ("body", "field"),
    [({"weight": 0}, "weight"), ({"rate": 5.5}, "rate"), ({"colour": 1}, "colour")],
)
def test_bad_shares_are_refused_and_change_nothing(
    client: TestClient[Any], queue: FairQueue, body: dict[str, Any], field: str
) -> None:
    response = client.put("/ui/api/tenants/a/shares", headers=JSON, json=body)
    assert response.status_code == 400, response.text
    assert field in response.text
    assert queue.tenants_with_shares().tenants == []


def test_task_name_limits_over_http(client: TestClient[Any], queue: FairQueue) -> None:
    queue.push_many([Task(user_id=f"u{n}", name="render") for n in range(3)])
    changed = client.put("/ui/api/names/render/limits", headers=JSON, json={"concurrency": 2})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["name"], changed.json()["concurrency"]) == ("render", 2)
    assert len(queue.pop(count=3, names=["render"])) == 2
    shown = get(client, "/names/render/limits")
    assert (shown["concurrency"], shown["running"]) == (2, 2)
    listed = get(client, "/limits")
    assert [one["name"] for one in listed["names"]] == ["render"]
    for body, field in (({"weight": 2}, "weight"), ({"rate": -1}, "rate")):
        refused = client.put("/ui/api/names/render/limits", headers=JSON, json=body)
        assert refused.status_code == 400, refused.text
        assert field in refused.text
    assert queue.limits("render").rate == 0
    # The name's tasks' defaults, from the same form.
    changed = client.put("/ui/api/names/render/limits", headers=JSON, json={"timeout": 42.5})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["timeout"], changed.json()["concurrency"]) == (42.5, 2)
    info = queue.get(queue.push(Task(user_id="u", name="render")))
    assert info is not None
    assert info.timeout == 42.5


def test_the_fairness_stream_pushes_the_view(server: LocalServer, namespace: str) -> None:
    config = DashboardConfig(UiConfig(server.url, namespace, sample_every=0.05))
    events: list[dict[str, Any]] = []
    with (
        FairQueue(server.url, namespace) as queue,
        serving(create_dashboard(config), free_port()) as url,
        httpx.Client(base_url=url, timeout=10) as http,
    ):
        queue.push_many([Task(user_id="a") for _ in range(2)])
        queue.pop(count=2)
        with http.stream("GET", "/ui/api/fairness/stream?top=3") as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = response.iter_lines()
            # Events keep coming: after a third start, one of them counts it.
            while not events or (events[-1]["starts"] < 3 and len(events) < 1000):
                line = next(lines)
                if line.startswith("data:"):
                    events.append(msgspec.json.decode(line[5:].strip()))
                    if len(events) == 1:
                        queue.push(Task(user_id="b"))
                        queue.pop()
    assert events[0]["starts"] == 2
    assert events[0]["tenants"][0]["tenant"] == "a"
    assert events[-1]["starts"] == 3
    assert events[-1]["at"] >= events[0]["at"]
