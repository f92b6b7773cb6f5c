"""Worker hooks: around each run and after each outcome, in-process and from the command
line (``--hooks``, children of ``--processes`` too); a hook that fails changes nothing."""

from __future__ import annotations

import asyncio
import contextvars
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from fairque import AsyncFairQueue, FairQueue, LeasedTask, QueueSettings, Task, TaskState
from fairque.errors import InvalidInput
from fairque.runners.fair_worker.hooks import load_hooks
from fairque.servers.embedded import LocalServer
from fairque.worker import Registry, Worker, WorkerConfig, WorkerHooks, task
from tests.conftest import StartCli, until, wait_for, waiting_workers

functions = Registry()
request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="")


@task(into=functions, name="tagged_sync")
def tagged_sync() -> str:
    return request_id.get()  # on a thread: what around_run set reaches it


@task(into=functions, name="tagged_async")
async def tagged_async() -> str:
    return request_id.get()


@task(into=functions, name="broken")
def broken() -> None:
    raise ValueError("boom")


class Recording(WorkerHooks):
    def __init__(self) -> None:
        self.events: list[tuple[str, str | None, Any]] = []

    @contextmanager
    def around_run(self, task: LeasedTask) -> Iterator[None]:
        token = request_id.set(f"req-{task.task_id}")
        self.events.append(("enter", task.name, task.attempts))
        try:
            yield
        finally:
            request_id.reset(token)
            self.events.append(("leave", task.name, task.attempts))

    def on_success(self, task: LeasedTask, result: Any, seconds: float) -> None:
        assert seconds >= 0
        self.events.append(("success", task.name, result))

    def on_retry(self, task: LeasedTask, error: str, seconds: float) -> None:
        self.events.append(("retry", task.name, error))

    def on_failure(self, task: LeasedTask, error: str, seconds: float) -> None:
        self.events.append(("failure", task.name, error))


class Failing(WorkerHooks):
    def around_run(self, task: LeasedTask) -> Any:
        raise RuntimeError("around is broken")

    def on_success(self, task: LeasedTask, result: Any, seconds: float) -> None:
        raise RuntimeError("success is broken")


async def test_hooks_wrap_each_run_and_hear_each_outcome(
    server: LocalServer, namespace: str
) -> None:
    queue = AsyncFairQueue(server.url, namespace, settings=QueueSettings(retry_backoff_base=0.01))
    sync_id = await queue.push(Task(user_id="u", name="tagged_sync", keep_result=True))
    async_id = await queue.push(Task(user_id="u", name="tagged_async", keep_result=True))
    await queue.push(Task(user_id="v", name="broken", max_retries=1))
    hooks = Recording()
    worker = Worker(WorkerConfig(redis_url=server.url, namespace=namespace), functions,
                    hooks=hooks)  # fmt: skip
    running = asyncio.create_task(worker.run_async())

    async def settled() -> bool:
        counters = (await queue.stats()).counters
        return (counters.get("finished", 0), counters.get("failed", 0)) == (2, 1)

    await until(settled)
    worker.stop()
    await running
    assert (await queue.result(sync_id)) == f"req-{sync_id}"
    assert (await queue.result(async_id)) == f"req-{async_id}"
    await queue.close()
    events = hooks.events
    assert ("success", "tagged_sync", f"req-{sync_id}") in events
    assert ("success", "tagged_async", f"req-{async_id}") in events
    assert [e for e in events if e[1] == "broken"] == [
        ("enter", "broken", 0), ("leave", "broken", 0), ("retry", "broken", "ValueError: boom"),
        ("enter", "broken", 1), ("leave", "broken", 1), ("failure", "broken", "ValueError: boom"),
    ]  # fmt: skip


async def test_a_failing_hook_is_logged_and_changes_nothing(
    server: LocalServer, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    queue = AsyncFairQueue(server.url, namespace)
    task_id = await queue.push(Task(user_id="u", name="tagged_async", keep_result=True))
    worker = Worker(WorkerConfig(redis_url=server.url, namespace=namespace), functions,
                    hooks=Failing())  # fmt: skip
    running = asyncio.create_task(worker.run_async())
    await until(lambda: queue_state(queue, task_id, TaskState.FINISHED))
    worker.stop()
    await running
    await queue.close()
    said = [(r.getMessage(), getattr(r, "task_id", None)) for r in caplog.records]
    assert (f"task {task_id}: the around_run hook failed", task_id) in said
    assert (f"task {task_id}: the on_success hook failed", task_id) in said


async def queue_state(queue: AsyncFairQueue, task_id: str, state: TaskState) -> bool:
    info = await queue.get(task_id)
    return info is not None and info.state is state


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("nothing", "'nothing': give MODULE:NAME"),
        ("no_such_module_here:Hooks", "No module named 'no_such_module_here'"),
        ("tests.test_worker_hooks:functions", "not a WorkerHooks subclass or instance"),
    ],
)
def test_bad_hooks_are_named(spec: str, words: str) -> None:
    with pytest.raises(InvalidInput, match=words) as caught:
        load_hooks(spec)
    assert caught.value.field == "hooks"


HOOKS = """
from pathlib import Path

from fairque.worker import WorkerHooks, task


@task(name="noted")
def noted() -> int:
    return 1


class Noting(WorkerHooks):
    def on_success(self, task, result, seconds):
        with Path("{out}").open("a") as out:
            out.write(task.task_id + "\\n")
"""


@pytest.mark.one_engine  # the command line's wiring: the same on every engine
@pytest.mark.parametrize("processes", ["1", "2"])
def test_fairque_worker_loads_hooks(
    start_cli: StartCli, server: LocalServer, namespace: str, tmp_path: Path, processes: str
) -> None:
    out = tmp_path / "noted.txt"
    (tmp_path / "noting.py").write_text(HOOKS.replace("{out}", str(out)))
    env = {"PYTHONPATH": str(tmp_path), "FAIRQUE_REDIS_URL": server.url,
           "FAIRQUE_NAMESPACE": namespace}  # fmt: skip
    worker = start_cli("worker", "--tasks", "noting", "--hooks", "noting:Noting",
                       "--processes", processes, env=env)  # fmt: skip
    with FairQueue(server.url, namespace) as queue:
        wait_for(lambda: waiting_workers(queue) == int(processes), timeout=60)
        ids = queue.push_many([Task(user_id=f"u{n}", name="noted") for n in range(6)])
        wait_for(lambda: out.exists() and len(out.read_text().split()) == 6, timeout=30)
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 0
    assert sorted(out.read_text().split()) == sorted(ids)


def test_fairque_worker_refuses_bad_hooks_in_one_line(start_cli: StartCli, tmp_path: Path) -> None:
    (tmp_path / "noting.py").write_text(HOOKS.replace("{out}", str(tmp_path / "x")))
    worker = start_cli("worker", "--tasks", "noting", "--hooks", "noting:noted",
                       env={"PYTHONPATH": str(tmp_path)})  # fmt: skip
    _, said = worker.communicate(timeout=30)
    assert worker.returncode == 2
    assert said == "error: --hooks noting:noted: not a WorkerHooks subclass or instance\n"
