"""The examples run as documented: a producer and a consumer in two processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from fairque import FairQueue
from fairque.config import URL_ENV
from fairque.servers.embedded import HOME_ENV, free_port, stop_server
from tests.conftest import Server, wait_for

EXAMPLES = Path(__file__).parent.parent / "examples"
CLI = [sys.executable, "-c", "from fairque.cli import main; main()"]


def test_producer_then_consumer_share_the_embedded_queue() -> None:
    home = Path(tempfile.mkdtemp(prefix="fq-", dir="/tmp"))
    env = {**os.environ, HOME_ENV: str(home)}
    env.pop(URL_ENV, None)
    try:
        producer = [sys.executable, str(EXAMPLES / "producer.py")]
        produced = subprocess.run(producer, env=env, capture_output=True, text=True, timeout=60,
                                  check=True)  # fmt: skip
        urgent_id = produced.stdout.split()[-1]
        consumer = subprocess.Popen([sys.executable, str(EXAMPLES / "consumer.py")], env=env,
                                    stderr=subprocess.DEVNULL)  # fmt: skip
        queue = FairQueue(f"unix://{home}/valkey.sock")
        wait_for(lambda: queue.stats().counters.get("finished") == 216, timeout=60)
        info = queue.get(urgent_id)
        assert info is not None
        assert info.result == "report for acme: 1 pages"
        consumer.send_signal(signal.SIGTERM)
        assert consumer.wait(timeout=30) == 0
        queue.close()
    finally:
        stop_server(home)


@pytest.mark.one_engine
def test_the_http_worker_example_registers_again_after_the_master_restarts(
    server: Server, namespace: str, tmp_path: Path
) -> None:
    port, worker_port = free_port(), free_port()
    master_url = f"http://127.0.0.1:{port}"
    env = {**os.environ, URL_ENV: server.url}
    master_command = [*CLI, "master", "--port", str(port), "--namespace", namespace]
    log = tmp_path / "worker.txt"
    started: list[subprocess.Popen[str]] = []

    def start_master() -> None:
        started.append(subprocess.Popen(master_command, env=env, text=True,
                                        stderr=subprocess.DEVNULL))  # fmt: skip

    def registered() -> bool:
        try:
            answer = httpx.get(f"{master_url}/workers", headers={"accept": "application/json"})
        except httpx.TransportError:
            return False
        return f"example-{worker_port}" in answer.text

    try:
        start_master()
        with log.open("w") as stderr:
            worker = subprocess.Popen(
                [sys.executable, str(EXAMPLES / "http_worker.py"), master_url, str(worker_port)],
                env=env, text=True, stderr=stderr,
            )  # fmt: skip
        started.append(worker)
        wait_for(registered, timeout=60)
        # It runs a job, spoken to in JSON (it registered in JSON); no MessagePack library.
        pushed = httpx.post(f"{master_url}/jobs", json={"name": "add", "argument": [2, 3],
                                                        "keep_result": True})  # fmt: skip
        job = f"{master_url}/jobs/{pushed.json()['id']}"
        wait_for(lambda: httpx.get(job).json()["state"] == "finished", timeout=60)
        assert httpx.get(f"{job}/result").json()["result"] == 5
        started[0].send_signal(signal.SIGTERM)
        assert started[0].wait(timeout=30) == 0
        wait_for(lambda: "master unreachable" in log.read_text(), timeout=60)
        start_master()
        wait_for(lambda: "registered again" in log.read_text(), timeout=60)
        wait_for(registered, timeout=60)
        assert worker.poll() is None
        assert "Traceback" not in log.read_text()
    finally:
        for process in started:  # ours only, by PID
            if process.poll() is None:
                process.kill()
            process.wait(timeout=10)
