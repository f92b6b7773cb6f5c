"""Clients generated from the committed OpenAPI documents run a job's life against a real
master, with no hand-written HTTP or encoding: the Python one (openapi-python-client) and
the TypeScript one (openapi-typescript + openapi-fetch, pinned in
``examples/generated/typescript/package-lock.json``). Each generator must take both
documents with no warning about our schemas, and each example worker registers in JSON,
so the master speaks JSON to it. A change to a document that breaks a generated client
fails here."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from fairque import QueueSettings
from fairque.http.master import MasterConfig, create_master
from fairque.servers.embedded import LocalServer, free_port
from tests.test_http_workers import serving

REPO = Path(__file__).resolve().parent.parent
DOCUMENTS = {"fairque_master": REPO / "docs/openapi.json",
             "fairque_worker": REPO / "docs/worker-openapi.json"}  # fmt: skip
PYTHON_EXAMPLE = REPO / "examples/generated/python"
TYPESCRIPT_EXAMPLE = REPO / "examples/generated/typescript"
OPENAPI_PYTHON_CLIENT = "openapi-python-client==0.29.0"  # the version the docs page names
FAST = QueueSettings(retry_backoff_base=0.05, retry_backoff_max=0.05)

pytestmark = [pytest.mark.one_engine, pytest.mark.long, pytest.mark.timeout(300)]


def required(what: str) -> None:
    """Skips for lack of ``what`` on a developer's machine; fails in CI, which installs it."""
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing (.ci/run installs it)")
    pytest.skip(f"{what} is missing")


@pytest.fixture
def master(server: LocalServer, namespace: str) -> Iterator[str]:
    config = MasterConfig(url=server.url, namespace=namespace, settings=FAST, poll=0.05)
    with serving(create_master(config), free_port()) as url:
        yield url


@contextmanager
def running(command: list[str], **options: object) -> Iterator[subprocess.Popen[str]]:
    """``command`` runs until the block ends (then it is ended, by its PID)."""
    process = subprocess.Popen(command, text=True, **options)  # type: ignore[call-overload]
    try:
        yield process
    finally:
        process.terminate()
        process.wait(10)


def life(command: list[str], **options: object) -> str:
    """What a pusher printed for a job's life, after checking it saw every step end well."""
    run = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False,
                         **options)  # type: ignore[call-overload]  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    steps = [line for line in run.stdout.splitlines() if line.startswith(("ok:", "NOT OK:"))]
    assert len(steps) == 12, run.stdout
    assert all(step.startswith("ok:") for step in steps), run.stdout
    assert "field name" in run.stdout  # the 400 named the field
    return str(run.stdout)


def test_the_python_client_runs_a_jobs_life(master: str, tmp_path: Path) -> None:
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        required("uv")
    packages = tmp_path / "generated"
    packages.mkdir()
    for package, document in DOCUMENTS.items():
        generate = subprocess.run(
            [str(uv), "tool", "run", "--from", OPENAPI_PYTHON_CLIENT, "openapi-python-client",
             "generate", "--path", str(document), "--output-path", str(packages / package),
             "--meta", "none"],
            capture_output=True, text=True, timeout=240, check=False,
        )  # fmt: skip
        assert generate.returncode == 0, generate.stdout + generate.stderr
        # Its only warnings: the MessagePack media type it does not support (JSON is
        # there beside it), never one of our schemas or responses.
        said = generate.stdout + generate.stderr
        warnings = re.findall(r"^(?:WARNING|Unable|Cannot|Failure|Could not).*$", said, re.M)
        unsupported = said.count("Unsupported content type application/msgpack")
        assert len(warnings) == unsupported, said
        assert "Cannot parse" not in said
        assert "removal of" not in said
    environment = {**os.environ, "PYTHONPATH": str(packages)}
    port = free_port()
    worker = [sys.executable, str(PYTHON_EXAMPLE / "worker.py"), master, str(port)]
    with running(worker, env=environment, stdout=subprocess.DEVNULL):
        life([sys.executable, str(PYTHON_EXAMPLE / "pusher.py"), master], env=environment)


def test_the_typescript_client_runs_a_jobs_life(master: str) -> None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        required("Node.js and npm")
    if not (TYPESCRIPT_EXAMPLE / "node_modules").is_dir():
        required(f"{TYPESCRIPT_EXAMPLE}/node_modules (npm ci there)")
    # Generates the types from the committed documents and type-checks the examples.
    build = subprocess.run(
        [str(npm), "run", "build"], cwd=TYPESCRIPT_EXAMPLE, capture_output=True, text=True,
        timeout=240, check=False,
    )  # fmt: skip
    assert build.returncode == 0, build.stdout + build.stderr
    assert "warn" not in (build.stdout + build.stderr).lower(), build.stdout + build.stderr
    built = TYPESCRIPT_EXAMPLE / "dist/src"
    port = free_port()
    with running([str(node), str(built / "worker.js"), master, str(port)],
                 stdout=subprocess.DEVNULL):  # fmt: skip
        life([str(node), str(built / "pusher.js"), master])
