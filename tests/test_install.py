"""The install page works as written: its commands put fairque into a uv project of its
own and into a fresh virtual environment with pip, and its check commands then run there,
with nothing of this checkout's environment on the path.

``/path/to/fairque`` on the page is a copy of the files a wheel is built from, so nothing
is written in this checkout. ``uv add`` resolves against the package index uv uses (its
cache answers for what it holds). In the pip environment, the dependencies are installed
first from ``uv.lock``, so that pip, without an index, installs the page's wheel alone:
what it checks is that pip takes that wheel, and that its command then works.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_docs import parse

ROOT = Path(__file__).parent.parent
PAGE = ROOT / "docs" / "install.md"
CHECKOUT = "/path/to/fairque"

pytestmark = pytest.mark.skipif(shutil.which("uv") is None, reason="uv is not installed")


def block(containing: str) -> str:
    """The page's one shell block that holds ``containing``."""
    blocks, _links = parse(PAGE)
    found = [b.code for b in blocks if b.language == "bash" and containing in b.code]
    assert len(found) == 1, f"install.md: {len(found)} blocks hold {containing!r}"
    return found[0]


def run(script: str, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180, check=False)  # fmt: skip
    assert done.returncode == 0, f"{script}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of what a wheel is built from: the package, its pytest plugin, the project
    file, the README."""
    copy = tmp_path_factory.mktemp("checkout") / "fairque"
    shutil.copytree(ROOT / "fairque", copy / "fairque",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for name in ("pyproject.toml", "README.md", "uv.lock", "fairque_pytest.py"):
        shutil.copy(ROOT / name, copy / name)
    return copy


def environment(tmp_path: Path, venv: Path) -> dict[str, str]:
    """The environment of a shell where ``venv`` is activated, and no other."""
    ours = {Path(sys.executable).parent, Path(sys.prefix) / "bin", ROOT / ".venv" / "bin"}
    kept = [part for part in os.environ["PATH"].split(os.pathsep) if Path(part) not in ours]
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("FAIRQUE_", "VIRTUAL_ENV", "UV_PROJECT", "PYTHON"))}  # fmt: skip
    env.update(PATH=os.pathsep.join([str(venv / "bin"), *kept]), VIRTUAL_ENV=str(venv),
               FAIRQUE_HOME=str(tmp_path / "home"))  # fmt: skip
    return env


def check(tmp_path: Path, venv: Path) -> None:
    env = environment(tmp_path, venv)
    assert shutil.which("fairque", path=env["PATH"]) == str(venv / "bin" / "fairque")
    said = run(block("fairque --version"), tmp_path, env)
    assert said.startswith("fairque "), said
    assert "Small tenants finished" in said, said


def test_uv_add_then_the_checks(checkout: Path, tmp_path: Path) -> None:
    project = tmp_path / "myapp"
    project.mkdir()
    env = environment(tmp_path, project / ".venv")
    run("uv init --bare --no-workspace -q", project, env)  # the reader's own project
    run(block("uv add").replace(CHECKOUT, str(checkout)), project, env)
    check(tmp_path, project / ".venv")


def test_pip_install_of_the_wheel_then_the_checks(checkout: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env = environment(tmp_path, venv)
    run(block("uv build").replace(CHECKOUT, str(checkout)), tmp_path, env)
    run(f"uv venv -q --seed {venv}", tmp_path, env)
    run(f"uv export -q --frozen --no-dev --no-emit-project --no-hashes -o {tmp_path}/deps.txt"
        f" && uv pip install -q -r {tmp_path}/deps.txt", checkout, env)  # fmt: skip
    offline = {**env, "PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull}
    run(block("pip install").replace(CHECKOUT, str(checkout)), tmp_path, offline)
    check(tmp_path, venv)
