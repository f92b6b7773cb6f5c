"""The examples run as documented: a producer and a consumer in two processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from fairque import FairQueue
from fairque.config import URL_ENV
from fairque.servers.embedded import HOME_ENV, stop_server
from tests.conftest import wait_for

EXAMPLES = Path(__file__).parent.parent / "examples"


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
