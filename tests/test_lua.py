"""The scripts: one per operation, includes expanded once, keys declared, no scans."""

from __future__ import annotations

import re
from importlib import resources

import pytest

from fairque import lua
from fairque.keys import FIXED_KEYS

SCRIPTS = sorted(
    entry.name.removesuffix(".lua")
    for entry in resources.files("fairque.lua").iterdir()
    if entry.name.endswith(".lua")
)


def test_every_operation_has_its_script() -> None:
    assert SCRIPTS == [
        "cancel", "constraint_set", "constraints", "due", "extend", "fail", "finish", "get",
        "job_complete", "job_pop", "job_push", "job_result", "jobs", "pop", "promote", "push",
        "reap", "release", "retry", "retry_failed", "schedule_pause", "schedule_read",
        "schedule_remove", "schedule_save", "scheduler_due", "scheduler_failed", "scheduler_fire",
        "scheduler_instance", "scheduler_lock", "scheduler_unlock", "stats", "storage_done",
        "storage_get", "storage_plan", "storage_put", "storage_retry", "storage_stat", "tasks",
        "xcom_pull", "xcom_push",
    ]  # fmt: skip


@pytest.mark.parametrize("name", SCRIPTS)
def test_scripts_are_self_contained(name: str) -> None:
    script = lua.load(name)
    assert "--@include" not in script.source
    assert script.source.startswith("local K = {")
    for helper in re.findall(r"^local function (\w+)", script.source, re.MULTILINE):
        assert script.source.count(f"local function {helper}(") == 1, helper
    # SMEMBERS is allowed: dependency sets are per task and read whole, as seed 000 does.
    forbidden = ["'KEYS'", '"KEYS"', "dofile", "loadstring", "cjson"]
    # The Web UI's task list reads one page of a critical list (at most `limit` ids).
    if name != "tasks":
        forbidden.append("LRANGE")
    for word in forbidden:
        assert word not in script.source, word
    assert "getkeys" not in script.source.lower()


def test_every_fixed_key_is_declared_in_order() -> None:
    header = lua.load("push").source.splitlines()[0]
    for index, name in enumerate(FIXED_KEYS, 1):
        assert f"['{name}'] = KEYS[{index}]" in header


def test_load_is_cached_and_hashed() -> None:
    assert lua.load("pop") is lua.load("pop")
    assert len(lua.load("pop").sha) == 40
