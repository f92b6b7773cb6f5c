"""The monitoring kit under deploy/: the Prometheus alert rules pass their own unit tests
(``promtool test rules``: each alert fires on what should fire it, and only then), and
every metric the rules and the Grafana dashboard query is one the code exports."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from fairque import FairQueue, RedisStorage, Task
from fairque.engine.outage import OutageLog
from fairque.http.metrics import MasterMetrics
from fairque.metrics import Metrics
from fairque.scheduler.metrics import SchedulerMetrics
from tests.conftest import Server

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
RULES = DEPLOY / "prometheus" / "fairque-alerts.yml"
RULE_TESTS = DEPLOY / "prometheus" / "fairque-alerts.test.yml"
DASHBOARD = DEPLOY / "grafana" / "fairque.json"
METRIC = re.compile(r"\b((?:fairque|queue)_[a-z_]+)\b")
SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):  # .ci/run puts it on PATH: CI never skips this
            pytest.fail("promtool is not on PATH")
        pytest.skip("no promtool here (Debian's prometheus package has it)")
    return found


def test_the_alert_rules_are_valid_and_pass_their_unit_tests() -> None:
    tool = promtool()
    checked = subprocess.run([tool, "check", "rules", str(RULES)], capture_output=True,
                             text=True, timeout=60, check=False)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([tool, "test", "rules", str(RULE_TESTS)], capture_output=True,
                            text=True, timeout=60, check=False)  # fmt: skip
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_every_alert_has_a_unit_test() -> None:
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    blocks = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    tested = {case["alertname"] for block in blocks for case in block["alert_rule_test"]}
    assert {rule["alert"] for rule in rules} == tested


def test_every_metric_the_rules_query_is_on_the_operations_page() -> None:
    page = (DEPLOY.parent / "docs" / "operate.md").read_text()
    missing = {name for name in queried()["alert rules"] if f"`{name}" not in page}
    assert not missing, f"operate.md's metrics table lacks {sorted(missing)}"


def queried() -> dict[str, set[str]]:
    """The metric names each file queries (a histogram's or counter's series by family)."""
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    panels = json.loads(DASHBOARD.read_text())["panels"]
    exprs = {
        "alert rules": [rule["expr"] for rule in rules],
        "dashboard": [target["expr"] for panel in panels for target in panel["targets"]]
        + [json.loads(DASHBOARD.read_text())["templating"]["list"][1]["query"]],
    }
    names: dict[str, set[str]] = {}
    for where, texts in exprs.items():
        found = {name for text in texts for name in METRIC.findall(text)}
        names[where] = {_family(name) for name in found}
    return names


def _family(name: str) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def master_metrics() -> set[str]:
    """The families of the master's /metrics, with a job counted."""

    async def states() -> dict[str, int]:
        return {"queued": 1}

    outage = OutageLog(logging.getLogger("test"), "of the queue", "waiting")
    master = MasterMetrics("n", states, lambda: 0, outage)
    asyncio.run(master.render())
    return {family.name for family in master.registry.collect()}


def test_every_queried_metric_is_exported(server: Server, namespace: str) -> None:
    metrics = Metrics()
    figures = SchedulerMetrics()
    figures.last_cycle_at = 1.0
    metrics.watch_scheduler(figures)
    with FairQueue(server.url, namespace) as queue, RedisStorage(server.url, namespace) as store:
        queue.push(Task(user_id="a", name="n"))
        queue.finish(queue.pop()[0])
        metrics.watch_queue(queue)
        metrics.watch_storage(store)
        exported = {family.name for family in metrics.registry.collect()}
    exported |= master_metrics()
    for where, names in queried().items():
        assert names, where
        assert names <= exported, f"{where} queries {sorted(names - exported)}, not exported"
