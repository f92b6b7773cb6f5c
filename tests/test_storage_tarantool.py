"""What the Tarantool storage does beyond the conformance suite: the asyncio client, the
write-ahead log across a killed server, an unreachable server, the stored function's
installation, and its limits."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
import tarantool

from fairque.errors import FairQueueError, InvalidInput
from fairque.runners.storage_worker import StorageWorker, StorageWorkerConfig
from fairque.servers.embedded import free_port
from fairque.servers.local_tarantool import LocalTarantool, TarantoolNotStarted, greets
from fairque.storage import (
    AsyncTarantoolStorage,
    PutTaskRequest,
    QueueReport,
    QueueStat,
    RetryInfo,
    StoreFull,
    TarantoolStorage,
    TarantoolUnreachable,
    WorkerReport,
)
from fairque.storage.models import MAX_COUNT, MAX_DATA_BYTES
from fairque.storage.tarantool import (
    FUNCTION,
    INSTALL,
    TarantoolAddress,
    TarantoolCall,
    procedures,
)
from tests.conftest import TARANTOOL, wait_for
from tests.test_storage_worker import CONTRACT, Recorder, until

UNREACHABLE = "tarantool://127.0.0.1:1"


@pytest.fixture
def storage(tarantool_server: LocalTarantool, namespace: str) -> Iterator[TarantoolStorage]:
    with TarantoolStorage(tarantool_server.url, namespace) as storage:
        yield storage


@pytest.fixture
def own_server() -> Iterator[LocalTarantool]:
    """A server of this test alone (it gets killed)."""
    if TARANTOOL is None:
        pytest.skip("no tarantool binary: apt-get install tarantool (.ci/run does)")
    with LocalTarantool(TARANTOOL) as started:
        yield started


async def test_async_tarantool_storage(tarantool_server: LocalTarantool, namespace: str) -> None:
    async with AsyncTarantoolStorage(tarantool_server.url, namespace) as storage:
        first = await storage.put_task(PutTaskRequest(1, b"a"))
        second, _ = await storage.put_tasks([PutTaskRequest(1, b"\xff"), PutTaskRequest(2, b"c")])
        taken = await storage.get_task(1, 5)
        assert [(task.id, task.data) for task in taken] == [(first, b"a"), (second, b"\xff")]
        assert await storage.retry_task([RetryInfo.after(second, 3600)]) == 1
        assert await storage.done_task([first]) == 1
        stats = await storage.get_stat()
        assert stats.queues == {1: QueueStat(1, 1, 0, 0, 1), 2: QueueStat(2, 1, 1, 0, 0)}
        report = WorkerReport("w", 1, {1: QueueReport(10)})
        assert await storage.beat(report, 60) is None
        assert await storage.publish_plan({"w": [1]}) == 1
        assert await storage.beat(report, 60) == [1]
        assert await storage.workers() == [report]
        assert await storage.read_plan() == {"w": [1]}


def test_acknowledged_puts_survive_a_killed_server(own_server: LocalTarantool) -> None:
    """A process streams put_task calls; the server is killed (SIGKILL, by PID) in the
    middle and restarted on the same data folder: every put that returned an id is
    there, and tasks taken before the kill come back after their visibility timeout."""
    storage = TarantoolStorage(own_server.url, "wal")
    taken_before = storage.put_tasks([PutTaskRequest(2, bytes([i])) for i in range(3)])
    assert len(storage.get_task(2, 10, visibility_timeout=1.0)) == 3
    producer = textwrap.dedent(f"""
        from fairque.storage import PutTaskRequest, TarantoolStorage, TarantoolUnreachable
        storage = TarantoolStorage({own_server.url!r}, "wal")
        try:
            for n in range(1_000_000):
                print(storage.put_task(PutTaskRequest(1, b"%d" % n)), flush=True)
        except TarantoolUnreachable as exc:
            print("unreachable", exc, flush=True)
    """)
    # Unbuffered: readline() takes no more than its line. A buffered reader reads ahead,
    # and communicate() reads the pipe itself, so the lines read ahead were lost: the
    # test counted puts as stored but not acknowledged (303 for 301, 315 for 301).
    child = subprocess.Popen([sys.executable, "-c", producer], stdout=subprocess.PIPE, bufsize=0)
    try:
        assert child.stdout is not None
        acknowledged = [int(child.stdout.readline()) for _ in range(300)]
        own_server.kill()
        output, _ = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    *more, last = output.decode().splitlines()
    assert last.startswith(f"unreachable cannot reach Tarantool at 127.0.0.1:{own_server.port}")
    acknowledged += [int(line) for line in more]
    own_server.start()
    stored = {task.id for task in storage.get_task(1, MAX_COUNT)}
    assert set(acknowledged) <= stored
    assert len(stored) - len(acknowledged) <= 1  # at most the put cut in flight
    back = wait_for(lambda: storage.get_task(2, 10))
    assert sorted(task.id for task in back) == taken_before
    assert {task.attempts for task in back} == {1}
    storage.close()


async def test_an_unreachable_server_is_one_clear_error() -> None:
    storage = TarantoolStorage(UNREACHABLE, connect_timeout=1.0)
    with pytest.raises(TarantoolUnreachable) as caught:
        storage.put_task(PutTaskRequest(1, b"x"))
    storage.close()
    message = str(caught.value)
    assert message.startswith("cannot reach Tarantool at 127.0.0.1:1: ")
    assert "\n" not in message
    assert isinstance(caught.value, ConnectionError)
    async with AsyncTarantoolStorage(UNREACHABLE, connect_timeout=1.0) as astorage:
        with pytest.raises(TarantoolUnreachable, match=r"at 127\.0\.0\.1:1: "):
            await astorage.get_stat()


async def test_a_worker_outlasts_a_server_that_refuses_calls(
    own_server: LocalTarantool, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that answers with an error (here read-only, as a full one does) is logged
    in one line per call and retried with backoff; the worker never ends on it, and
    drains the queue once the server takes writes again."""
    recorder = Recorder()
    async with AsyncTarantoolStorage(own_server.url, "refusing") as storage:
        await storage.put_tasks([CONTRACT.queue("emails").request({"to": "a", "fail": False})] * 5)
        own_server.admin("box.cfg{read_only = true}")
        worker = StorageWorker(
            storage, CONTRACT, {"emails": recorder("emails")}, StorageWorkerConfig(idle_wait=0.02)
        )
        running = asyncio.create_task(worker.run())
        await until(lambda: worker.server_errors >= 2)
        assert not running.done()
        own_server.admin("box.cfg{read_only = false}")
        await until(lambda: worker.stats[1].processed == 5)
        worker.stop()
        await running
    [line, *_] = [r.getMessage() for r in caplog.records if "the storage failed" in r.getMessage()]
    assert line.startswith("queue emails: the storage failed (Tarantool at 127.0.0.1:")
    assert "read-only" in line
    assert "\n" not in line


async def refusal(
    storage: AsyncTarantoolStorage, requests: list[PutTaskRequest]
) -> StoreFull | None:
    """Puts ``requests``: None, or the refusal of a full store."""
    try:
        await storage.put_tasks(requests)
    except StoreFull as refused:
        return refused
    return None


async def fill(
    storage: AsyncTarantoolStorage, request: PutTaskRequest, batch: int = 10
) -> tuple[int, StoreFull]:
    """Puts ``request`` ``batch`` at a time until the store is full: how many it holds,
    and the refusal."""
    stored = 0
    while stored < 200_000:  # a bound; the stores filled here hold fewer
        refused = await refusal(storage, [request] * batch)
        if refused is not None:
            return stored, refused
        stored += batch
    pytest.fail(f"{stored} tasks put and the store is not full")


async def put_fits(storage: AsyncTarantoolStorage, request: PutTaskRequest) -> bool:
    return await refusal(storage, [request]) is None


async def test_a_full_store_refuses_puts_and_still_drains(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Filled with 64 KiB tasks until a put is refused, the store still drains: taking,
    retrying and finishing a task need no memory for a payload over 1 KiB (a take used to
    rewrite the whole tuple, and failed like the puts)."""
    if TARANTOOL is None:
        pytest.skip("no tarantool binary: apt-get install tarantool (.ci/run does)")
    big = CONTRACT.queue("emails").request({"to": "x" * 65536, "fail": False})
    with LocalTarantool(TARANTOOL, memory_mib=32) as server:
        async with AsyncTarantoolStorage(server.url, "full") as storage:
            stored, refused = await fill(storage, big)
            assert stored > 0
            assert str(refused) == (
                f"Tarantool at 127.0.0.1:{server.port}: the store is full (memtx_memory is "
                "32 MiB): nothing was put; finishing tasks frees room, or give the server "
                "more (FAIRQUE_TARANTOOL_MEMORY)"
            )
            assert (await storage.get_stat()).of(1).total == stored  # the refused put: none
            [first] = await storage.get_task(1, 1, visibility_timeout=60)
            assert await storage.retry_task([RetryInfo.after(first.id, 0)]) == 1
            recorder = Recorder()
            worker = StorageWorker(
                storage,
                CONTRACT,
                {"emails": recorder("emails")},
                StorageWorkerConfig(idle_wait=0.02),
            )
            running = asyncio.create_task(worker.run())
            await until(lambda: worker.stats[1].processed == stored, timeout=60)
            worker.stop()
            await running
            assert worker.server_errors == 0
            assert (await storage.get_stat()).queues == {}
            # Room again, once the server's collector has freed the tuples.
            await until(lambda: put_fits(storage, big), timeout=30)


@pytest.mark.parametrize("size", [100, 1000])
async def test_a_store_full_of_small_tasks_drains(size: int) -> None:
    """Small payloads stay in the task's tuple, whose rewrite at a take needs a free slot
    of its size: a reserve kept by the puts and freed by the takes that run out of memory
    gives it one (takes failed with "Failed to allocate 580 bytes" without it)."""
    if TARANTOOL is None:
        pytest.skip("no tarantool binary: apt-get install tarantool (.ci/run does)")
    small = PutTaskRequest(1, b"x" * size)
    with LocalTarantool(TARANTOOL, memory_mib=32) as server:
        async with AsyncTarantoolStorage(server.url, "small") as storage:
            stored, _ = await fill(storage, small, batch=100)
            taken = 0
            while taken < stored:  # bounded: each take leases 100 or fails the test
                leased = await storage.get_task(1, 100, visibility_timeout=600)
                assert leased, f"{taken} of {stored} taken, then none"
                taken += len(leased)
            retried = await storage.retry_task([RetryInfo.after(task.id, 0) for task in leased])
            assert retried == len(leased)
            for start in range(1, stored + 1, 1000):
                await storage.done_task(list(range(start, min(start + 1000, stored + 1))))
            assert (await storage.get_stat()).queues == {}
            await until(lambda: put_fits(storage, small), timeout=30)


async def test_a_worker_waits_out_an_unreachable_server() -> None:
    async with AsyncTarantoolStorage(UNREACHABLE, connect_timeout=1.0) as storage:
        worker = StorageWorker(
            storage, CONTRACT, {"emails": Recorder()("emails")}, StorageWorkerConfig(idle_wait=0.02)
        )
        running = asyncio.create_task(worker.run())
        await until(lambda: worker.outages >= 2)
        worker.stop()
        await running
    assert worker.stats[1].handled == 0


def super_user(server: LocalTarantool) -> str:
    """The URL of a user with every right (made on the admin console), who may install."""
    server.admin(
        "box.schema.user.create('installer', {password = 'pw', if_not_exists = true}); "
        "box.schema.user.grant('installer', 'super', nil, nil, {if_not_exists = true})"
    )
    return f"tarantool://installer:pw@127.0.0.1:{server.port}"


async def test_the_function_is_installed_again_when_the_server_lost_it(
    own_server: LocalTarantool,
) -> None:
    """As after a restart on an empty data folder: a client that may install it installs
    it again at its next call; one that may not says what the server lacks."""
    url = super_user(own_server)
    drop = f"box.schema.func.drop('{FUNCTION}')"
    with (
        TarantoolStorage(url, "lost") as storage,
        TarantoolStorage(own_server.url, "lost") as guest,
    ):
        storage.put_task(PutTaskRequest(1, b"a"))
        assert guest.get_stat().of(1).total == 1
        own_server.admin(drop)
        assert storage.get_stat().of(1).total == 1  # installed again
        with pytest.raises(FairQueueError, match="user guest may not call fairque's stored"):
            guest.get_stat()  # its right went with the dropped function
    async with AsyncTarantoolStorage(url, "lost") as astorage:
        assert (await astorage.get_stat()).of(1).total == 1
        own_server.admin(drop)
        assert (await astorage.get_stat()).of(1).total == 1


def test_the_function_body_quotes_any_source(own_server: LocalTarantool) -> None:
    """Installed from a source that closes the first long brackets, the function still
    loads and answers."""
    source = procedures() + "\n-- ]] ]=] ]==]\n"
    super_user(own_server)
    admin = tarantool.Connection(
        "127.0.0.1", own_server.port, user="installer", password="pw", fetch_schema=False
    )
    assert admin.eval(INSTALL, source, FUNCTION).data == [True]
    assert "]==]" in own_server.admin(f"return box.func.{FUNCTION}.body")
    with TarantoolStorage(own_server.url, "quoted") as storage:  # guest's right carried over
        storage.put_task(PutTaskRequest(1, b"a"))
        assert storage.get_stat().of(1).total == 1
    admin.close()


def test_clients_may_call_the_function_and_nothing_else(own_server: LocalTarantool) -> None:
    guest = tarantool.Connection("127.0.0.1", own_server.port, fetch_schema=False)
    with pytest.raises(tarantool.DatabaseError, match="Execute access to universe"):
        guest.eval("return box.info.version")
    with pytest.raises(tarantool.DatabaseError, match="denied"):
        guest.call("box.schema.user.create", "intruder")
    guest.close()


def test_a_stock_tarantool_says_what_it_lacks_and_how_to_grant_it(tmp_path: Path) -> None:
    """A server started with box.cfg{listen = ...} alone: guest may neither install nor
    call the function."""
    if TARANTOOL is None:
        pytest.skip("no tarantool binary: apt-get install tarantool (.ci/run does)")
    port = free_port()
    (tmp_path / "stock.lua").write_text(f"box.cfg{{listen = '127.0.0.1:{port}', log = 'log'}}\n")
    stock = subprocess.Popen([TARANTOOL, "stock.lua"], cwd=tmp_path)
    try:
        wait_for(lambda: greets(port), timeout=30)
        url = f"tarantool://127.0.0.1:{port}"
        expected = (
            rf"Tarantool at 127\.0\.0\.1:{port}: user guest may not call fairque's stored "
            r"function \(Execute access to function 'fairque_storage' is denied for user "
            r"'guest'\): start the server with fairque's instance file .* "
            r"box\.schema\.user\.grant\('guest', 'execute', 'function', 'fairque_storage'\)"
        )
        with (
            TarantoolStorage(url, "stock") as storage,
            pytest.raises(FairQueueError, match=expected),
        ):
            storage.put_task(PutTaskRequest(1, b"a"))
    finally:
        stock.terminate()
        stock.wait(timeout=10)


@pytest.mark.parametrize("listen", ["0.0.0.0:3301", "3301", "[::]:3301"])
def test_a_server_open_beyond_loopback_needs_a_user(tmp_path: Path, listen: str) -> None:
    """Refused before it binds: nothing listens, and one line says what to set."""
    if TARANTOOL is None:
        pytest.skip("no tarantool binary: apt-get install tarantool (.ci/run does)")
    instance = resources.files("fairque.servers").joinpath("tarantool_instance.lua")
    env = {**os.environ, "FAIRQUE_TARANTOOL_LISTEN": listen, "FAIRQUE_TARANTOOL_DIR": "."}
    env.pop("FAIRQUE_TARANTOOL_USER", None)
    with resources.as_file(instance) as path:
        run = subprocess.run(
            [TARANTOOL, str(path)], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=30, check=False,
        )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr == (
        f"fairque tarantool: listening on {listen} lets anyone there in as guest: set "
        "FAIRQUE_TARANTOOL_USER and FAIRQUE_TARANTOOL_PASSWORD, or listen on 127.0.0.1\n"
    )
    assert not (tmp_path / "tarantool.log").exists()


def test_a_memory_limit_below_tarantools_floor_is_refused(tmp_path: Path) -> None:
    if TARANTOOL is None:
        pytest.skip("no tarantool binary: apt-get install tarantool (.ci/run does)")
    server = LocalTarantool(TARANTOOL, data_dir=tmp_path, memory_mib=8)
    with pytest.raises(
        TarantoolNotStarted,
        match="FAIRQUE_TARANTOOL_MEMORY must be a whole number of MiB, at least 32",
    ):
        server.start()


def test_a_user_logs_in_with_a_password_and_may_only_call_the_function() -> None:
    if TARANTOOL is None:
        pytest.skip("no tarantool binary: apt-get install tarantool (.ci/run does)")
    with LocalTarantool(TARANTOOL, user=("app", "p@ss word")) as server:
        with TarantoolStorage(server.url, "users") as storage:
            storage.put_task(PutTaskRequest(1, b"a"))
            assert storage.get_stat().of(1).total == 1
        app = tarantool.Connection(
            "127.0.0.1", server.port, user="app", password="p@ss word", fetch_schema=False
        )
        with pytest.raises(tarantool.DatabaseError, match="Execute access to universe"):
            app.eval("return 1")
        app.close()
        with pytest.raises(FairQueueError, match="user guest may not call"):
            TarantoolStorage(f"tarantool://127.0.0.1:{server.port}", "users").get_stat()


async def test_other_server_errors_name_the_server(
    storage: TarantoolStorage, tarantool_server: LocalTarantool, namespace: str
) -> None:
    # Arguments no client of this version sends: the procedure fails on them.
    bad = TarantoolCall("done", ("done", namespace, "not a list"), int)
    with pytest.raises(
        FairQueueError, match=rf"Tarantool at 127\.0\.0\.1:{tarantool_server.port}: "
    ):
        storage.execute(bad)
    async with AsyncTarantoolStorage(tarantool_server.url, namespace) as astorage:
        with pytest.raises(FairQueueError, match="error 32"):
            await astorage.execute(bad)
        with pytest.raises(InvalidInput) as caught:
            await astorage.execute(TarantoolCall("x", ("x", namespace), list))
        assert caught.value.field == "op"


def test_the_largest_batches_and_payloads(storage: TarantoolStorage) -> None:
    ids = storage.put_tasks([PutTaskRequest(1, b"") for _ in range(MAX_COUNT)])
    assert [task.id for task in storage.get_task(1, MAX_COUNT)] == ids
    assert storage.done_task(ids) == MAX_COUNT
    big = bytes(range(256)) * (MAX_DATA_BYTES // 256)
    task_id = storage.put_task(PutTaskRequest(3, big))
    [task] = storage.get_task(3, 1)
    assert (task.id, task.data) == (task_id, big)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("tarantool://db.example:3302", TarantoolAddress("db.example", 3302)),
        ("tarantool://127.0.0.1", TarantoolAddress("127.0.0.1", 3301)),
        ("tarantool://app:s%40cret@h:1", TarantoolAddress("h", 1, "app", "s@cret")),
    ],
)
def test_urls(url: str, expected: TarantoolAddress) -> None:
    assert TarantoolAddress.parse(url) == expected
    assert str(expected) == f"{expected.host}:{expected.port}"


@pytest.mark.parametrize("url", ["redis://h:1", "tarantool://", "tarantool://h:port"])
def test_bad_urls(url: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        TarantoolStorage(url)
    assert caught.value.field == "url"


def test_bad_namespace() -> None:
    with pytest.raises(InvalidInput) as caught:
        TarantoolStorage("tarantool://h:1", "")
    assert caught.value.field == "namespace"


def test_a_binary_that_cannot_run_is_named() -> None:
    server = LocalTarantool("/nonexistent/tarantool")
    with pytest.raises(TarantoolNotStarted, match="cannot run /nonexistent/tarantool"):
        server.start()
    server.close()
    assert not server.data_dir.exists()


def test_a_server_that_cannot_listen_is_named() -> None:
    if TARANTOOL is None:
        pytest.skip("no tarantool binary: apt-get install tarantool (.ci/run does)")
    server = LocalTarantool(TARANTOOL)
    with socket.socket() as taken:  # its port is taken: tarantool exits
        taken.bind(("127.0.0.1", server.port))
        taken.listen()
        with pytest.raises(
            TarantoolNotStarted,
            match=rf"did not start on 127\.0\.0\.1:{server.port}: .*Address already in use",
        ):
            server.start()
    assert server.pid is None
    server.close()


async def test_a_user_who_may_only_call_the_function(
    storage: TarantoolStorage, tarantool_server: LocalTarantool, namespace: str
) -> None:
    """Installing needs admin rights; a user granted only the function works once an
    admin's client has installed it."""
    storage.put_task(PutTaskRequest(1, b"a"))
    tarantool_server.admin(
        "box.schema.user.create('caller', {password = 'pw', if_not_exists = true}); "
        f"box.schema.user.grant('caller', 'execute', 'function', '{FUNCTION}', "
        "{if_not_exists = true})"
    )
    url = f"tarantool://caller:pw@127.0.0.1:{tarantool_server.port}"
    with TarantoolStorage(url, namespace) as caller:
        assert caller.get_stat().of(1).total == 1
    async with AsyncTarantoolStorage(url, namespace) as acaller:
        assert (await acaller.get_stat()).of(1).total == 1


async def test_the_asyncio_client_reconnects_after_a_restart(own_server: LocalTarantool) -> None:
    async with AsyncTarantoolStorage(own_server.url, "restart") as storage:
        task_id = await storage.put_task(PutTaskRequest(1, b"a"))
        own_server.kill()
        with pytest.raises(TarantoolUnreachable):
            await storage.get_stat()
        own_server.start()
        [task] = await storage.get_task(1, 1)
        assert task.id == task_id
