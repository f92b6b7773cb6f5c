"""The deployment files of ``deploy/`` work as shipped: the systemd units pass
``systemd-analyze verify``, the Kubernetes manifests match the Kubernetes schemas
(kubernetes-validate, offline), the container file passes hadolint, every command line in
them is one the CLI takes, each probe asks the port its process answers on, and
docs/deploy.md shows every file (included from it, so never a stale copy)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from fairque.cli import app

ROOT = Path(__file__).parent.parent
DEPLOY = ROOT / "deploy"
UNITS = sorted((DEPLOY / "systemd").glob("*.service"))
MANIFESTS = sorted((DEPLOY / "kubernetes").glob("*.yaml"))
CONTAINER_FILE = DEPLOY / "Containerfile"
INSTALLED = "/opt/fairque/bin/fairque"  # where docs/deploy.md installs the command
TOOLS = Path(sys.executable).parent  # this environment's commands (the dev group's too)
PROCESSES = {"master", "dashboard", "scheduler", "worker", "storage-worker", "storage-manager"}
ROOT_COMMAND = typer.main.get_command(app)


def run(*command: str | Path) -> str:
    """The command's output (stdout and stderr); it must exit 0."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def parse(words: list[str]) -> dict[str, Any]:
    """The parameters ``fairque WORDS`` runs with, as the CLI parses them (unknown options
    and bad values fail here), without running it."""
    command: Any = ROOT_COMMAND
    context = command.context_class(command, info_name="fairque")
    while hasattr(command, "get_command"):  # a group: the next word names a command of it
        name = words.pop(0)
        group = command
        command = group.get_command(context, name)
        assert command is not None, f"fairque has no command {name}"
        if hasattr(command, "get_command"):
            context = command.context_class(command, info_name=name, parent=context)
        else:
            context = command.make_context(name, words, parent=context)
    return dict(context.params)


def exec_start(unit: Path) -> list[str]:
    line = re.search(r"^ExecStart=(.*)$", unit.read_text(), re.MULTILINE)
    assert line is not None, f"{unit.name}: no ExecStart"
    program, *words = shlex.split(line.group(1))
    assert program == INSTALLED, f"{unit.name}: runs {program}, not {INSTALLED}"
    return words


def containers() -> list[tuple[str, dict[str, Any]]]:
    """Every container of the manifests' Deployments, by file name."""
    return [
        (manifest.name.removesuffix(".yaml"), container)
        for manifest in MANIFESTS
        for resource in yaml.safe_load_all(manifest.read_text())
        if resource["kind"] == "Deployment"
        for container in resource["spec"]["template"]["spec"]["containers"]
    ]


# CI installs it (.ci/run): there a missing systemd-analyze fails the test.
@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None and not os.environ.get("CI"),
    reason="no systemd-analyze (Debian's systemd package)",
)
def test_the_systemd_units_verify(tmp_path: Path) -> None:
    # verify wants ExecStart's program to exist: copies run this environment's fairque.
    copies = []
    for unit in UNITS:
        copy = tmp_path / unit.name
        copy.write_text(unit.read_text().replace(INSTALLED, str(TOOLS / "fairque")))
        copies.append(copy)
    # It exits 0 on an unknown key or a bad value too, saying so: any output fails.
    assert run("systemd-analyze", "verify", *copies) == ""


def test_the_manifests_match_the_kubernetes_schemas(tmp_path: Path) -> None:
    validate = TOOLS / "kubernetes-validate"
    run(validate, "--strict", "--quiet", *MANIFESTS)
    # The validator sees a mistake (it has its schemas offline): a probe's misspelt field.
    master = (DEPLOY / "kubernetes" / "master.yaml").read_text()
    assert "periodSeconds" in master
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(master.replace("periodSeconds", "periodSecond"))
    assert subprocess.run([validate, "--strict", wrong], check=False).returncode != 0


def test_the_container_file_passes_hadolint() -> None:
    assert run(TOOLS / "hadolint", CONTAINER_FILE) == ""


def test_every_process_is_deployed_with_a_command_the_cli_takes() -> None:
    units = {unit.name: exec_start(unit) for unit in UNITS}
    for name, words in units.items():
        parse(words)
        assert name.removeprefix("fairque-").removesuffix(".service") in PROCESSES
    assert len(units) == len(PROCESSES)
    assert {name for name, _ in containers()} == PROCESSES


@pytest.mark.parametrize(("manifest", "container"), containers(), ids=[n for n, _ in containers()])
def test_each_probe_asks_the_port_its_process_answers_on(
    manifest: str, container: dict[str, Any]
) -> None:
    params = parse(list(container["args"]))
    served = {params.get(option) for option in ("port", "health_port", "metrics_port")}
    ports = {port["name"]: port["containerPort"] for port in container.get("ports", [])}
    for probe in ("livenessProbe", "readinessProbe"):
        spec = container[probe]
        if "httpGet" in spec:  # the process listens on the pod's address
            host = params.get("host") or params.get("monitoring_host")
            assert host == "0.0.0.0", manifest
            port = ports.get(spec["httpGet"]["port"], spec["httpGet"]["port"])
        else:  # on its loopback: the probe runs inside the container
            url = re.search(r"http://127\.0\.0\.1:(\d+)/", " ".join(spec["exec"]["command"]))
            assert url is not None, f"{manifest}: {probe} asks no loopback URL"
            port = int(url.group(1))
        assert port in served, f"{manifest}: {probe} asks port {port}, it serves {served}"


def test_the_deploy_page_shows_every_file() -> None:
    page = (ROOT / "docs" / "deploy.md").read_text()
    included = set(re.findall(r"^```\{literalinclude\} \.\./(\S+)$", page, re.MULTILINE))
    shipped = {str(path.relative_to(ROOT)) for path in (*UNITS, *MANIFESTS, CONTAINER_FILE)}
    shipped.add("deploy/systemd/fairque.env")
    assert shipped <= included, f"docs/deploy.md does not show {sorted(shipped - included)}"
