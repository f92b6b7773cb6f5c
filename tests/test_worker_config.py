"""Worker configuration: YAML, environment overrides, validation naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairque import InvalidInput
from fairque.worker import WorkerConfig, load_config

CONFIG = Path(__file__).parent.parent / "config"
TEMPLATE = CONFIG / "worker_config.assigned-tenants.yaml"


def test_the_readme_template_serves_every_tenant_of_the_configured_server() -> None:
    config = load_config(CONFIG / "worker_config.yaml", env={})
    assert (config.assigned_users, config.steal_targets, config.redis_url) == (None, None, None)
    assert config.namespace == "default"


def test_the_full_example_loads() -> None:
    config = load_config(TEMPLATE, env={})
    assert config.id == "worker-001"
    assert config.assigned_users == ["user:1", "user:3", "user:5"]
    assert config.steal_targets == ["user:2", "user:4", "user:6", "user:7"]
    assert (config.poll_interval_seconds, config.task_timeout_seconds) == (45.0, 300)
    assert config.redis_url == "redis://localhost:6379/0"


def test_environment_overrides_the_file_and_arguments_override_both() -> None:
    env = {
        "FAIRQUE_WORKER_ID": "from-env",
        "FAIRQUE_ASSIGNED_USERS": "a, b,,c",
        "FAIRQUE_CONCURRENCY": "32",
        "FAIRQUE_REDIS_URL": "redis://elsewhere:6380/1",
        "UNRELATED": "x",
    }
    config = load_config(TEMPLATE, env=env, overrides={"grace_seconds": 1})
    assert (config.id, config.assigned_users, config.concurrency) == (
        "from-env",
        ["a", "b", "c"],
        32,
    )
    assert (config.redis_url, config.grace_seconds) == ("redis://elsewhere:6380/1", 1)


def test_defaults_without_a_file() -> None:
    config = load_config(env={})
    assert config.assigned_users is None
    assert config.redis_url is None
    assert ":" in config.id


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"poll_interval_seconds": -1}, "poll_interval_seconds"),
        ({"task_timeout_seconds": "soon"}, "task_timeout_seconds"),
        ({"assigned_users": "alice"}, "assigned_users"),
        ({"id": ""}, "id"),
        ({"colour": "blue"}, "colour"),
        ({"shards": 0}, "shards"),
        ({"sync_runner": "fork"}, "sync_runner"),
    ],
)
def test_bad_values_name_the_field(values: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        WorkerConfig.from_values(values)
    assert raised.value.field == field


def test_shards_from_the_environment() -> None:
    assert load_config(env={}).shards == 1
    assert load_config(env={"FAIRQUE_SHARDS": "12"}).shards == 12


def test_sync_runner_from_the_environment() -> None:
    assert load_config(env={}).sync_runner == "thread"
    assert load_config(env={"FAIRQUE_SYNC_RUNNER": "process"}).sync_runner == "process"


def test_a_bad_environment_value_names_the_field() -> None:
    with pytest.raises(InvalidInput, match="concurrency"):
        load_config(env={"FAIRQUE_CONCURRENCY": "many"})


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("worker: [1, 2", "config"),
        ("workers:\n  id: x\n", "workers"),  # the unknown key is named
        ("- a\n- b\n", "config"),
        ("redis: 5\n", "redis"),
        ("worker:\n  lease_seconds: 0\n", "lease_seconds"),
        ("worker:\n  colour: blue\n", "colour"),
        ("redis:\n  hots: localhost\n", "redis.hots"),
        ("redis:\n  port: seventy\n", "redis.port"),
        ("redis:\n  db: -1\n", "redis.db"),
        ("redis:\n  url: redis://x\n  port: 1\n", "redis.url"),
    ],
)
def test_bad_files_are_refused(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "worker.yaml"
    path.write_text(text)
    with pytest.raises(InvalidInput) as raised:
        load_config(path, env={})
    assert raised.value.field == field


def test_seed_001_redis_section_with_credentials(tmp_path: Path) -> None:
    path = tmp_path / "worker.yaml"
    path.write_text("redis:\n  host: h.example\n  port: 6380\n  db: 2\n  password: 'p@ss'\n")
    assert load_config(path, env={}).redis_url == "redis://:p%40ss@h.example:6380/2"


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="cannot read"):
        load_config(tmp_path / "absent.yaml", env={})


def test_redis_url_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "worker.yaml"
    path.write_text("redis:\n  url: unix:///tmp/valkey.sock\n")
    assert load_config(path, env={}).redis_url == "unix:///tmp/valkey.sock"
