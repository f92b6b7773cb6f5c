"""The master's API fuzzed from its own OpenAPI document by schemathesis with every check
it has (``--checks all``: no server error, status codes, content types, headers and
bodies as documented, schema-valid requests accepted and invalid ones refused, 405 with
``Allow``, auth required where declared, stateful use of the links), against a master
served over real HTTP. Bodies go out in both encodings (the document offers both; the
hooks write MessagePack); answers come back as MessagePack without a token and as JSON
with one. Each run is bounded by a count of examples per operation.

The coverage phase (boundary values of every parameter, about 1,600 requests and four
fifths of a run's time) is not bounded by that count; what it checks, the requests'
validation, does not depend on the answer's encoding or the token, so it runs in the
first variant only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from fairque import QueueSettings
from fairque.http.master import MasterConfig, create_master
from fairque.http.openapi import openapi_document
from fairque.servers.embedded import LocalServer, free_port
from tests.test_http_workers import serving

REPO = Path(__file__).parent.parent
SCHEMATHESIS = Path(sys.executable).with_name("schemathesis")
# Test cases per operation and phase (--max-examples): a count, not a time budget, so a
# loaded machine does the same work, only slower.
EXAMPLES = 5
ALL_PHASES = ("examples", "coverage", "fuzzing", "stateful")
FAST = QueueSettings(retry_backoff_base=0.05, retry_backoff_max=0.05)


class Variant(NamedTuple):
    token: str | None  # the bearer token the master requires
    accept: str  # the encoding of the answers
    phases: tuple[str, ...]  # schemathesis's phases that run


class Counting:
    """The app, counting the HTTP requests it answers."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.requests += 1
        await self.app(scope, receive, send)


@pytest.mark.one_engine  # the HTTP layer is the same on every engine: fuzzed once
@pytest.mark.long
@pytest.mark.timeout(900)  # bounded by its count of examples; a busy machine takes longer
@pytest.mark.parametrize(
    "variant",
    [
        Variant(None, "application/msgpack", ("coverage", "fuzzing", "stateful")),
        Variant("s3cret", "application/json", ("fuzzing", "stateful")),
    ],
    ids=lambda variant: f"{variant.token}-{variant.accept}",
)
def test_every_schemathesis_check_passes(
    server: LocalServer,
    namespace: str,
    tmp_path: Path,
    variant: Variant,
) -> None:
    token, accept, phases = variant
    config = MasterConfig(
        url=server.url, namespace=namespace, settings=FAST, poll=0.05, token=token
    )
    app = create_master(config)
    schema = tmp_path / "openapi.json"
    schema.write_text(json.dumps(openapi_document(app)))
    report = tmp_path / "report.json"
    counting = Counting(app)
    with serving(counting, free_port()) as url:  # type: ignore[arg-type]
        command = [
            str(SCHEMATHESIS), "run", str(schema), "--url", url, "--checks", "all",
            "--max-examples", str(EXAMPLES), "--seed", "1", "--workers", "1",
            "--generation-database", "none", "--no-color", "--header", f"Accept: {accept}",
            "--phases", ",".join(phases), "--report", "json",
            "--report-json-path", str(report),
        ]  # fmt: skip
        if token:
            command += ["--header", f"Authorization: Bearer {token}"]
        environment = {**os.environ, "SCHEMATHESIS_HOOKS": "tests.schemathesis_hooks",
                       "PYTHONPATH": str(REPO)}  # fmt: skip
        run = subprocess.run(
            command, cwd=tmp_path, env=environment, capture_output=True, text=True,
            timeout=600, check=False,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-2000:]
    summary = json.loads(report.read_text())
    assert summary["failures"] == []
    assert summary["errors"] == []
    assert summary["operations"]["tested"] == summary["operations"]["total"] == 38
    ran = {name: phase["status"] for name, phase in summary["phases"].items()}
    # The schema has no examples, so that phase has nothing to run; a phase left out skips.
    expected = {name: "success" if name in phases else "skip" for name in ALL_PHASES}
    assert ran == expected, ran
    assert counting.requests > 100  # it did fuzz (about 150 requests, 1,750 with coverage)
    print(f"schemathesis, token={token!r}, {accept}: {summary['test_cases']['generated']} "
          f"test cases, {counting.requests} requests, 0 failures")  # fmt: skip
