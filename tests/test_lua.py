"""The scripts: one per operation, grouped by entry point, includes expanded once, keys
and arguments declared in their headers, and every call held to its script's header."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from fairque import (
    Constraint,
    FairQueue,
    FairQueueError,
    Job,
    Matcher,
    PutTaskRequest,
    QueueSettings,
    RetryInfo,
    Task,
    TaskState,
)
from fairque.engine import records, scripts
from fairque.engine import settings as settings_store
from fairque.engine.calls import Call, pack
from fairque.engine.connect import sync_client
from fairque.engine.fields import MICROS
from fairque.engine.keys import Namespace
from fairque.jobs import JobOps, LeasedJob, Success
from fairque.queue import (
    BulkAction,
    LeasedTask,
    LimitsChange,
    Priority,
    Selector,
    SharesChange,
    WorkerInfo,
)
from fairque.queue.calls import bulk, figures, leases, maintenance, push, quotas, workers
from fairque.queue.calls import tasks as task_calls
from fairque.scheduler import MissedRuns, Schedule, TaskTemplate
from fairque.scheduler.config import SchedulerConfig
from fairque.scheduler.ops import Grant, SchedulerOps, anchored
from fairque.servers.embedded import LocalServer
from fairque.storage.ops import StorageOps
from tests.conftest import Server

SCRIPTS = scripts.names()
NAMESPACE = Namespace("headers")
KEY_REFERENCE = re.compile(r"\bK\.(\w+)|\bK\['([^']+)'\]")


def test_every_operation_has_its_script_in_its_entry_points_folder() -> None:
    assert SCRIPTS == [
        "jobs/complete", "jobs/constraint_set", "jobs/constraints", "jobs/list", "jobs/pop",
        "jobs/push", "jobs/result",
        "namespace/backlog", "namespace/cancel", "namespace/due", "namespace/fairness",
        "namespace/get", "namespace/promote", "namespace/reap", "namespace/retry",
        "namespace/settings", "namespace/stats", "namespace/tasks", "namespace/tenant_stats",
        "queue/bulk", "queue/extend", "queue/fail", "queue/finish", "queue/finish_pop",
        "queue/hand_over", "queue/idle_pop",
        "queue/limits", "queue/pop",
        "queue/push", "queue/release", "queue/report", "queue/tenant",
        "queue/upkeep",
        "queue/workers", "queue/xcom_pull", "queue/xcom_push",
        "scheduler/claim", "scheduler/failed", "scheduler/fire", "scheduler/instance",
        "scheduler/pause", "scheduler/read", "scheduler/remove", "scheduler/save",
        "scheduler/unlock",
        "storage/done", "storage/get", "storage/plan", "storage/put", "storage/retry",
        "storage/stat",
    ]  # fmt: skip


@pytest.mark.parametrize("name", SCRIPTS)
def test_scripts_are_self_contained(name: str) -> None:
    script = scripts.load(name)
    assert "--@include" not in script.source
    assert script.source.startswith(scripts.KEY_NAMES + "local NAMESPACE = namespace_of(ARGV[1])\n")
    for helper in re.findall(r"^local function (\w+)", script.source, re.MULTILINE):
        assert script.source.count(f"local function {helper}(") == 1, helper
    # SMEMBERS is allowed: dependency sets are per task and read whole, as seed 000 does.
    forbidden = ["'KEYS'", '"KEYS"', "dofile", "loadstring", "cjson"]
    # The Web UI's task list and a bulk operation's batch read one slice of a critical
    # list (a page, a batch: at most 1,000 ids).
    if name not in {"namespace/tasks", "queue/bulk"}:
        forbidden.append("LRANGE")
    for word in forbidden:
        assert word not in script.source, word
    assert "getkeys" not in script.source.lower()


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_declares_exactly_the_keys_it_touches(name: str) -> None:
    script = scripts.load(name)
    code = re.sub(
        r"--[^\n]*", "", script.source[len(scripts.KEY_NAMES) :].split("\n", 3)[3]
    )  # past the prelude
    used = {dotted or quoted for dotted, quoted in KEY_REFERENCE.findall(code)}
    assert used == {scripts.lua_name(key) for key in script.keys}
    # Keys made from ids hash to the namespace's slot: every one starts with the prefix.
    assert "PREFIX .. '" in code or not re.search(r"redis\.call\('\w+', '", code)


def test_the_prelude_names_the_keys_sent_in_order() -> None:
    script = scripts.load("namespace/get")
    assert script.keys == ("task:<id>", "result:<id>", "deps:blocked:<id>", "deps:waiting:<id>")
    assert script.sent_keys == script.keys  # each has a parameter: the caller fills it
    prelude = script.source[len(scripts.KEY_NAMES) :].splitlines()[1]
    assert prelude == (
        "local K = setmetatable({['task'] = KEYS[1], ['result'] = KEYS[2], "
        "['deps:blocked'] = KEYS[3], ['deps:waiting'] = KEYS[4]}, NAMESPACE.view)"
    )


def test_fixed_keys_are_made_from_the_prefix_not_sent() -> None:
    """A call sends the first declared key for routing; the script makes the others from
    the prefix when it reads them (each key sent cost the server ~0.9k instructions)."""
    script = scripts.load("queue/pop")
    assert script.sent_keys == ("scheduled",)
    assert len(script.keys) > 10
    assert script.source[len(scripts.KEY_NAMES) :].splitlines()[1] == "local K = NAMESPACE.keys"
    call = leases.pop(NAMESPACE, 1)
    assert call.keys == (NAMESPACE.prefix + "scheduled",)


LUA = Path(scripts.__file__).parent / "lua"
INCLUDES = sorted(path.stem for path in (LUA / "include").glob("*.lua"))
FILES = {
    name: (LUA / f"{name}.lua").read_text(encoding="utf-8")
    for name in [*SCRIPTS, *(f"include/{include}" for include in INCLUDES)]
}
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
TOP_LEVEL = re.compile(r"^local\s+(?:function\s+(\w+)|([\w\s,]+?)\s*=)", re.MULTILINE)
DECLARED = re.compile(
    r"\bfunction\s*(\w*)\s*\(([^)]*)\)|\blocal\s+(?!function)([\w\s,]+?)\s*(?:=|\n)"
    r"|\bfor\s+([\w\s,]+?)\s+in\b|\bfor\s+(\w+)\s*="
)


def _code(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


def _top_level(include: str) -> tuple[set[str], set[str]]:
    """An include's top-level functions and variables."""
    functions: set[str] = set()
    variables: set[str] = set()
    for function, names in TOP_LEVEL.findall(FILES[f"include/{include}"]):
        if function:
            functions.add(function)
        else:
            variables |= {name.strip() for name in names.split(",")}
    return functions, variables


def _declared(text: str) -> set[str]:
    """The names a file declares itself: its locals, parameters and loop variables."""
    return {
        name
        for match in DECLARED.findall(_code(text))
        for group in match
        for name in IDENTIFIER.findall(group)
    }


@pytest.mark.parametrize("name", FILES)
def test_a_file_includes_only_what_it_uses(name: str) -> None:
    """Each ``--@include`` of a script or include gives it something it calls or reads
    itself: what it needs only through that include's own includes, it includes."""
    used = set(IDENTIFIER.findall(_code(FILES[name])))
    for include in re.findall(r"^--@include (\w+)$", FILES[name], re.MULTILINE):
        functions, variables = _top_level(include)
        assert (functions | variables) & used, f"{name} uses nothing of include/{include}"


@pytest.mark.parametrize("include", INCLUDES)
def test_an_includes_state_is_its_own(include: str) -> None:
    """A call's state in an include (a variable not named in capitals) is read and written
    there alone: other code calls its functions (shares.lua's forget_shares)."""
    _, variables = _top_level(include)
    state = {name for name in variables if not name.isupper()}
    for name, text in FILES.items():
        if name != f"include/{include}":
            reached = state & set(IDENTIFIER.findall(_code(text))) - _declared(text)
            assert not reached, f"{name} reaches into include/{include}'s {sorted(reached)}"


def test_each_field_a_namespace_keeps_has_one_include() -> None:
    """What a library keeps per namespace (the loader's NAMESPACE) is shared by every
    include: each field is kept by one."""
    keepers: dict[str, list[str]] = {}
    for name, text in FILES.items():
        for field in sorted(set(re.findall(r"\bNAMESPACE\.(\w+)", _code(text)))):
            keepers.setdefault(field, []).append(name)
    assert {field: names for field, names in keepers.items() if len(names) > 1} == {}
    assert set(keepers) == {"lanes", "lanes_kept", "figures_minute", "figures_prefix"}


LUA_NAMES = {
    "and", "assert", "elseif", "error", "function", "if", "in", "ipairs", "next", "not",
    "or", "pairs", "pcall", "return", "select", "setmetatable", "tonumber", "tostring",
    "type", "unpack", "until", "while",
}  # fmt: skip


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_script_reaches_only_what_it_defines(name: str) -> None:
    """A function a script calls, or a constant it reads, is in its source, from an
    include it names (a library may reach no global but Lua's and the server's)."""
    code = re.sub(r"'[^'\n]*'", "''", _code(scripts.load(name).source))
    called = set(re.findall(r"(?<![\w.:])(\w+)\s*\(", code))
    constants = set(re.findall(r"(?<![\w.:])([A-Z][A-Z0-9_]*)\b", code))
    assert (called | constants) - _declared(code) - LUA_NAMES - {"ARGV", "KEYS"} == set()


# A helper that gathers writes for the end of the call, and the one that makes them.
GATHERED = {
    "append": "flush_appends",
    "count": "flush_counters",
    "next_tick": "flush_writes",
    "queue_ready": "flush_ready",
    "lane_servable": "wake_workers",
    "lease_ended": "flush_running",
    "note_start": "flush_figures",
    "end_task": "flush",
}


@pytest.mark.parametrize("name", SCRIPTS)
def test_what_a_script_gathers_it_writes(name: str) -> None:
    """A script that returns through a narrower flush (figures.lua's flush_counts) gathers
    nothing that only a wider one writes."""
    source = scripts.load(name).source
    for gathers, writes in GATHERED.items():
        if f"local function {gathers}(" in source:
            assert f"local function {writes}(" in source, (gathers, writes)


def test_load_is_cached_and_hashed() -> None:
    assert scripts.load("queue/pop") is scripts.load("queue/pop")
    assert len(scripts.load("queue/pop").sha) == 40


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_scripts_library_loads(server: Server, name: str) -> None:
    script = scripts.load(name)
    client = sync_client(server.url)
    try:
        client.function_load(script.library, replace=True)
        assert script.function.startswith("fq_")
        assert f"function_name = '{script.function}', callback = run" in script.library
    finally:
        client.close()


def test_a_librarys_call_starts_from_fresh_state(server: Server) -> None:
    # Helpers are made once, but their variables are set again by each call: a table a
    # call fills is empty for the next, as with EVAL.
    helpers = "local seen = {}\nlocal function note(x) seen[#seen + 1] = x; return #seen end\n"
    function, library = scripts.function_library((), helpers, "return note(ARGV[1])")
    client = sync_client(server.url)
    try:
        client.function_load(library, replace=True)
        assert [client.fcall(function, 0, "x") for _ in range(3)] == [1, 1, 1]
    finally:
        client.close()


READ_ONLY = [
    "jobs/constraints", "jobs/list", "namespace/backlog", "namespace/due", "namespace/fairness",
    "namespace/get",
    "namespace/stats", "namespace/tasks", "namespace/tenant_stats", "queue/xcom_pull",
]  # fmt: skip


def test_the_scripts_that_only_read_say_so() -> None:
    assert [name for name in SCRIPTS if scripts.load(name).flags == ("no-writes",)] == READ_ONLY


def test_reads_still_answer_when_the_server_is_out_of_memory() -> None:
    # A function without flags is refused on a server over its maxmemory before it runs;
    # one flagged no-writes runs. The server is this test's own: it is made to refuse.
    # (Loading a library is a write too: the reads are loaded before.)
    with LocalServer() as server, FairQueue(server.url, "oom") as queue:
        task_id = queue.push(Task(user_id="u"))
        assert queue.stats().all_tenants.queued == 1
        assert queue.get(task_id) is not None
        queue.redis.config_set("maxmemory", 1)
        try:
            assert queue.stats().all_tenants.queued == 1
            assert queue.get(task_id) is not None
            with pytest.raises(FairQueueError, match="maxmemory"):
                queue.push(Task(user_id="u"))
        finally:
            queue.redis.config_set("maxmemory", 0)


def test_a_script_may_declare_only_known_flags() -> None:
    with pytest.raises(ValueError, match="unknown flags"):
        scripts.declared_flags("x", "-- FLAGS: allow-stale")


def test_constants_are_made_once_and_state_at_each_call(server: Server) -> None:
    helpers = (
        "local LIMIT = 10 * 2\n"  # a constant: made when the library loads
        "local NAMES = {'a', 'b'}\n"
        "local LOG_TWO = math.log(2)\n"  # calls a library: loading may not, so per call
        "local WHERE = ARGV[1]\n"  # the call's argument: per call
        "local SEEN = {WHERE}\n"  # uses per-call state: per call
        "local seen = {}\n"
    )
    body = "return {LIMIT, #NAMES, LOG_TWO > 0, WHERE, #SEEN, #seen}"
    function, library = scripts.function_library((), helpers, body)
    made_once, per_call = library.split("local STARTS = ")
    assert "local LIMIT = 10 * 2" in made_once
    assert "local NAMES = {'a', 'b'}" in made_once
    for name in ("LOG_TWO", "WHERE", "SEEN", "seen"):  # set by the functions the call runs first
        assert f"\n{name} = " in per_call
        assert f"\n{name} = " not in made_once
    assert "STARTS[1]()" in per_call
    client = sync_client(server.url)
    try:
        client.function_load(library, replace=True)
        assert client.fcall(function, 0, "x") == [20, 2, 1, b"x", 1, 0]
    finally:
        client.close()


def test_a_call_may_have_more_state_than_a_lua_function_has_upvalues(server: Server) -> None:
    # Lua 5.1 allows a function 60 upvalues: several functions set the state, in order.
    count = 3 * scripts.STATE_UPVALUES
    helpers = "local v0 = {}\n" + "".join(
        f"local v{i} = {{v{i - 1}}}\n" for i in range(1, count)
    )  # each made from the one before
    body = f"v0[#v0 + 1] = 1\nreturn {{#v0, #v{count - 1}, #v{count - 1}[1]}}"
    function, library = scripts.function_library((), helpers, body)
    assert library.count("STARTS[") >= 3
    client = sync_client(server.url)
    try:
        client.function_load(library, replace=True)
        assert [client.fcall(function, 0, "x") for _ in range(2)] == [[1, 1, 1]] * 2
    finally:
        client.close()


def test_a_variable_defined_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="defined twice"):
        scripts.function_library((), "local a = 1\nlocal a = 2\n", "return a")


def _leased() -> LeasedTask:
    return LeasedTask("t1", "alice", Priority.NORMAL, None, None, 0, 0.0, "7", 30.0, 3, 0, 0, None)


def _job() -> LeasedJob:
    return LeasedJob("j1", "resize", None, 0, 0, 30.0, 0, "9", 0.0)


def _grant(schedule_id: str = "s1", late: float = 0) -> Grant:
    """A claimed schedule due at 0, seen ``late`` seconds after (past its grace: skipped)."""
    schedule = anchored(SCHEDULE.model_copy(update={"missed": MissedRuns.SKIP}), 0)
    definition = pack(schedule.model_dump(mode="json"))
    return Grant(schedule_id, "tok", round(late * MICROS), b"0", definition, 1, None)


JOBS = JobOps(NAMESPACE)
SCHEDULER, STORAGE = SchedulerOps(NAMESPACE), StorageOps(NAMESPACE)
LATER = datetime.now(timezone.utc) + timedelta(hours=1)
SCHEDULE = Schedule(interval=60, task=TaskTemplate(name="ping", user_id="ops"))

# Every call the ops build, with the arguments that give each script its longest form.
CALLS: dict[str, Callable[[], Call[Any]]] = {
    "queue push": lambda: push.push(NAMESPACE, [Task(user_id="a"), Task(user_id="b", delay=5)]),
    "queue pop": lambda: leases.pop(
        NAMESPACE,
        3,
        assigned_users=["a"],
        steal_targets=["b", "c"],
        worker_id="w1",
        lease_seconds=30.0,
    ),
    "queue pop all": lambda: leases.pop(NAMESPACE, 3),
    "queue finish": lambda: leases.finish(NAMESPACE, [_leased()], [{"ok": 1}]),
    "queue finish_pop": lambda: leases.finish_and_pop(
        NAMESPACE,
        [_leased()],
        [{"ok": 1}],
        count=3,
        assigned_users=["a"],
        steal_targets=["b"],
        names=["n"],
    ),
    "queue release": lambda: leases.release(NAMESPACE, [_leased()]),
    "queue fail": lambda: leases.fail(NAMESPACE, _leased(), "boom", retry=True),
    "queue extend": lambda: leases.extend(NAMESPACE, _leased(), 10.0),
    "queue report": lambda: leases.report(NAMESPACE, _leased(), 50.0, "half", ["a line"]),
    "queue bulk": lambda: bulk.batch(
        NAMESPACE,
        BulkAction.RETRY,
        Selector(user_id="alice"),
        TaskState.FAILED,
        position=0,
        as_of=0,
        size=500,
        dry_run=False,
    ),
    "queue xcom_push": lambda: task_calls.xcom_push(NAMESPACE, "t1", "k", 1, None),
    "queue xcom_pull": lambda: task_calls.xcom_pull(NAMESPACE, "t1", "k"),
    "queue workers": lambda: workers.register_worker(
        NAMESPACE, WorkerInfo("w1", "host", 7, ("add",), 4, 0, 1.7e9), 10.0
    ),
    "queue upkeep": lambda: workers.upkeep(
        NAMESPACE,
        WorkerInfo("w1", "host", 7, ("add",), 4, 0, 1.7e9),
        10.0,
        rewrite=False,
        longest_wait=30.0,
        names=["add", "render"],
    ),
    "queue idle_pop": lambda: workers.idle_pop(
        NAMESPACE,
        2.5,
        4,
        worker_id="w1",
        ttl=60.0,
        longest_wait=30.0,
        round_interval=2.0,
        lease_seconds=None,
        names=["add"],
    ),
    "queue hand_over": lambda: leases.hand_over(NAMESPACE, [_leased()], 1.0, 60.0),
    "queue tenant": lambda: quotas.set_tenant(
        NAMESPACE, "a", SharesChange(weight=2, rate=5, period=1.0)
    ),
    "queue tenants": lambda: quotas.tenants_with_shares(NAMESPACE, 0, 10),
    "queue limits": lambda: quotas.set_limits(NAMESPACE, "render", LimitsChange(concurrency=2)),
    "queue limits page": lambda: quotas.names_with_limits(NAMESPACE, 0, 10),
    "namespace fairness": lambda: figures.fairness(NAMESPACE, 5, 20),
    "namespace cancel": lambda: records.cancel(NAMESPACE, "t1", abort=True),
    "namespace retry": lambda: records.retry(NAMESPACE, "t1"),
    "namespace get": lambda: task_calls.get(NAMESPACE, "t1"),
    "namespace tasks": lambda: task_calls.tasks(
        NAMESPACE, "queued", 0, 10, user_id="alice", name="n"
    ),
    "namespace stats": lambda: figures.stats(NAMESPACE),
    "namespace tenant_stats page": lambda: figures.busiest_tenants(NAMESPACE, 0, 10),
    "namespace tenant_stats named": lambda: figures.tenant_stats(NAMESPACE, "alice"),
    "namespace settings": lambda: settings_store.write(
        NAMESPACE, QueueSettings(finished_ttl=5, maintenance_batch=7)
    ),
    "namespace reap": lambda: maintenance.reap(NAMESPACE, 100),
    "namespace due": lambda: maintenance.next_due(NAMESPACE),
    "namespace backlog": lambda: figures.backlog(NAMESPACE, 20),
    "namespace promote": lambda: maintenance.promote(NAMESPACE, 100),
    "jobs push": lambda: JOBS.push([Job(name="a"), Job(name="b", argument=[1])]),
    "jobs pop": lambda: JOBS.pop("w1", 2, ["a", "b"]),
    "jobs complete": lambda: JOBS.complete(_job(), Success(finished_at=LATER), 60.0),
    "jobs release": lambda: JOBS.release(_job()),
    "jobs result": lambda: JOBS.take_result("j1"),
    "jobs list": lambda: JOBS.jobs("queued", "a", 0, 10),
    "jobs constraint_set": lambda: JOBS.set_constraint(
        "c1", Constraint(match=[Matcher(field="name", op="equals", value="a")], concurrency=1)
    ),
    "jobs constraints": JOBS.constraints,
    "scheduler save": lambda: SCHEDULER.save(SCHEDULE, 0, "add"),
    "scheduler remove": lambda: SCHEDULER.remove("s1"),
    "scheduler pause": lambda: SCHEDULER.pause("s1"),
    "scheduler read": lambda: SCHEDULER.read(["s1", "s2"]),
    "scheduler claim": lambda: SCHEDULER.claim(
        "i1", {"state": "running"}, "tok", SchedulerConfig()
    ),
    "scheduler instance": lambda: SCHEDULER.record("i1", {"state": "stopped"}, 60.0),
    "scheduler fire": lambda: SCHEDULER.fire(
        [SCHEDULER.firing(_grant("s1", late=3600)), SCHEDULER.firing(_grant("s2"))]
    ),
    "scheduler failed": lambda: SCHEDULER.failed(_grant(), 0, "boom", SchedulerConfig()),
    "scheduler unlock": lambda: SCHEDULER.unlock({"s1": "tok", "s2": "tok"}),
    "storage get": lambda: STORAGE.get_task(3, 10),
    "storage done": lambda: STORAGE.done_task([1, 2]),
    "storage retry": lambda: STORAGE.retry_task([RetryInfo.after(1, 1.0)]),
    "storage put": lambda: STORAGE.put_tasks(
        [PutTaskRequest(1, b"a"), PutTaskRequest(2, b"b", start_time=LATER)]
    ),
    "storage stat": STORAGE.get_stat,
    "storage plan": lambda: STORAGE.publish_plan({"w1": [1, 2], "w2": [3]}),
}


def test_every_script_has_a_call_checked_below() -> None:
    assert {CALLS[case]().script.name for case in CALLS} == set(SCRIPTS)


@pytest.mark.parametrize("case", CALLS)
def test_a_call_sends_the_keys_and_arguments_its_script_declares(case: str) -> None:
    call = CALLS[case]()
    script = call.script
    declared = [*script.sent_keys]
    if script.variadic_key is not None:
        assert len(call.keys) > len(declared)  # every such call names its queues
        declared += [script.variadic_key] * (len(call.keys) - len(script.sent_keys))
    assert len(call.keys) == len(declared)
    for key, name in zip(call.keys, declared, strict=True):
        # All under the namespace's hash tag: one cluster slot.
        pattern = re.sub(r"<\w+>", "[^:]+", re.escape(NAMESPACE.prefix + name))
        assert re.fullmatch(pattern, key), (key, name)
    if script.variadic_args:
        assert len(call.args) >= script.arg_count
    else:
        assert len(call.args) == script.arg_count
    assert call.args[0] == NAMESPACE.prefix


def test_the_scripts_defaults_are_the_settings_defaults() -> None:
    """A setting nobody wrote reads the same in a script as in QueueSettings."""
    source = scripts.load("namespace/reap").source
    table = source[
        source.index("local DEFAULT_SETTINGS = {") : source.index(
            "}", source.index("local DEFAULT_SETTINGS")
        )
    ]
    defaults = dict(re.findall(r"(\w+) = ([\d.]+),", table))
    assert {name: float(value) for name, value in defaults.items()} == {
        name: float(value) for name, value in QueueSettings().model_dump().items()
    }
