"""The documentation works when pasted: README.md, CHANGELOG.md and every page of docs/ are
parsed as Markdown (every code block closed, every local link and anchor there), and in
the pages of ``DOCS`` every shell and Python block meant to run is run, in order, against
a throwaway server.

How a block is treated is in its info string, which GitHub ignores after the language:

- ```` ```python ````: run, in one interpreter per document, so a block builds on the
  ones before it. A block whose first line is ``# name.py`` is written to that file in
  the working folder instead (``tasks.py`` for ``--tasks tasks``).
- ```` ```bash ````: run with ``bash -e``; it must exit 0.
- ```` ```bash long-running ````: one command started in the background; it must print its
  start line, keep running to the end of the document, and stop cleanly on SIGTERM.
- ```` ```python no-run ```` / ```` ```bash no-run ````: not run (a cluster, another host, a
  secret, or the test suite itself); a Python one is still compiled and its imports run.

Commands run as a user runs them in a fresh project, outside the checkout: in an empty
temporary folder, with fairque installed as install.md says with pip (a wheel built from
the checkout, once per test session, into a virtual environment of its own, with the
``otel`` extra and pytest with pytest-asyncio, which operate.md and testing.md have their
reader add). A file a page uses comes from the page: a ``# name.py`` block, or a command
that copies it from ``/path/to/fairque``, the checkout as install.md names it (this test
puts the checkout's path there). ``FAIRQUE_REDIS_URL`` names a server this test starts
and ``FAIRQUE_HOME`` a folder of its own, so nothing touches the user's embedded server
or the shared Redis. Documented ports (3301, 8080, 8081, 8082, 8090, 9102, 9110) are
replaced by free ones, and ``uv run X`` runs X in this environment.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from fairque import FairQueue, TaskState
from fairque.config import URL_ENV
from fairque.servers.embedded import HOME_ENV, LocalServer, free_port, stop_server
from tests.conftest import wait_for

ROOT = Path(__file__).parent.parent
# Every page: the README, the changelog and the site's pages (not the generated ones).
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
# The pages whose blocks are run (a no-run Python block: its imports), each in its own
# session: every page that holds a block to run, or Python.
DOCS = [
    ROOT / "docs" / f"{page}.md" for page in (
        "install", "getting-started", "client", "workers", "testing", "scheduler", "storage",
        "http", "other-languages", "web-ui", "cli", "clusters", "high-availability",
        "operate", "upgrade",
    )
]  # fmt: skip
LANGUAGES = {"python", "bash", "sh", "yaml", "lua", "json", "text", "pycon", "ini", "typescript"}
RUNNABLE = {"python", "bash", "sh"}
FLAGS = {"no-run", "long-running", "redis-conf"}
# Runnable blocks a document holds at least (5 unless named here).
RUNNABLE_AT_LEAST = {
    "install.md": 1, "workers.md": 1, "scheduler.md": 2, "storage.md": 1,
    "http.md": 1, "web-ui.md": 1, "cli.md": 1, "clusters.md": 0, "high-availability.md": 1,
    "operate.md": 2, "upgrade.md": 2, "other-languages.md": 4,
}  # fmt: skip
PORTS = ("3301", "8080", "8081", "8082", "8090", "9102", "9110")
PORT_ENV = {"8080": "FAIRQUE_MASTER_PORT", "8081": "FAIRQUE_DASHBOARD_PORT",
            "8082": "FAIRQUE_HTTP_WORKER_PORT"}  # fmt: skip
STARTED = "(Ctrl-C stops)"  # the end of every long-running command's start line
ASSIGNMENTS = re.compile(r"^(\w+=\S*\s+)*")  # VARIABLE=value before a command
FILE_BLOCK = re.compile(r"#\s*([\w/]+\.py)\s*$")
SHIM = 'uv() { if [ "$1" = run ]; then shift; "$@"; else command uv "$@"; fi; }\n'
CHECKOUT = "/path/to/fairque"  # how the pages name the checkout fairque is installed from

# The Python session: reads blocks as JSON lines, runs each in one shared namespace,
# answers one JSON line per block.
SESSION = r"""
import json, sys, traceback
answers, sys.stdout = sys.stdout, sys.stderr  # what the blocks print goes to stderr
scope = {"__name__": "__docs__"}
for line in sys.stdin:
    block = json.loads(line)
    try:
        exec(compile(block["code"], block["where"], "exec"), scope)  # as a script runs it
        answer = {"ok": True}
    except BaseException:
        answer = {"ok": False, "error": traceback.format_exc()}
    print(json.dumps(answer), file=answers, flush=True)
"""


@dataclass
class Block:
    doc: Path
    line: int  # 1-based line of the opening fence
    language: str
    flags: set[str]
    code: str
    closed: bool

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def parse(doc: Path) -> tuple[list[Block], list[str]]:
    """The fenced blocks of ``doc``, and its link targets."""
    text = doc.read_text()
    lines = text.splitlines()
    blocks: list[Block] = []
    links: list[str] = []
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    for token in tokens:
        if token.type == "fence" and token.map is not None:
            start, end = token.map
            words = token.info.split()
            closing = lines[end - 1].strip() if end - 1 > start else ""
            closed = closing.startswith(token.markup) and not closing.strip("`~")
            blocks.append(Block(doc, start + 1, words[0] if words else "", set(words[1:]),
                                token.content, closed))  # fmt: skip
        children = token.children or []
        links.extend(str(child.attrs.get("href", "")) for child in children
                     if child.type == "link_open")  # fmt: skip
    return blocks, links


def slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    tokens = MarkdownIt("commonmark").parse(doc.read_text())
    return {
        slug(tokens[i + 1].content)
        for i, token in enumerate(tokens)
        if token.type == "heading_open"
    }


@pytest.mark.parametrize("doc", PAGES, ids=lambda doc: doc.name)
def test_the_markdown_is_well_formed(doc: Path) -> None:
    blocks, links = parse(doc)
    for block in blocks:
        assert block.closed, f"{block.where}: the code block is never closed"
        assert not re.search(r"^\s*```", block.code, re.MULTILINE), f"{block.where}: a fence inside"
        if block.language.startswith("{"):  # a Sphinx directive ({toctree}), not code
            continue
        assert block.language in LANGUAGES, f"{block.where}: language {block.language!r}"
        assert block.flags <= FLAGS, f"{block.where}: unknown flags {block.flags - FLAGS}"
        if block.language == "python":  # no-run blocks too, as a script (no top-level await)
            compile(block.code, block.where, "exec")
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue  # another site
        target, _, anchor = link.partition("#")
        path = (doc.parent / target).resolve() if target else doc
        assert path.exists(), f"{doc.name}: link to {link}: no such file"
        if anchor and path.suffix == ".md":
            assert anchor in anchors(path), f"{doc.name}: link to {link}: no such heading"


def test_every_page_with_commands_is_run() -> None:
    for page in PAGES:
        blocks, _links = parse(page)
        if any(block.language == "python" or (block.language in RUNNABLE
               and "no-run" not in block.flags) for block in blocks):  # fmt: skip
            assert page in DOCS, f"{page.name} holds commands: add it to DOCS"


@dataclass
class Session:
    """What a document's blocks share: a folder, an environment, a Python interpreter,
    the servers and services they started."""

    folder: Path
    env: dict[str, str]
    ports: dict[str, str]
    installed_python: Path  # the interpreter fairque is installed for
    python: subprocess.Popen[str] | None = None
    services: list[tuple[Block, subprocess.Popen[str], Path]] = field(default_factory=list)

    def localize(self, code: str) -> str:
        code = code.replace(CHECKOUT, str(ROOT))
        return re.sub(r"\b(" + "|".join(PORTS) + r")\b", lambda m: self.ports[m.group(1)], code)

    def run_python(self, block: Block) -> None:
        if self.python is None:
            self.python = subprocess.Popen(
                [self.installed_python, "-c", SESSION], cwd=self.folder, env=self.env, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            )  # fmt: skip
        assert self.python.stdin is not None
        assert self.python.stdout is not None
        message = {"code": self.localize(block.code), "where": block.where}
        self.python.stdin.write(json.dumps(message) + "\n")
        self.python.stdin.flush()
        answer = json.loads(self.python.stdout.readline() or '{"ok": false, "error": "died"}')
        assert answer["ok"], f"{block.where} failed:\n{answer['error']}"

    def run_shell(self, block: Block) -> None:
        script = SHIM + self.localize(block.code)
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=self.folder,
                              env=self.env, capture_output=True, text=True, timeout=120,
                              check=False)  # fmt: skip
        assert done.returncode == 0, f"{block.where} failed:\n{done.stdout}\n{done.stderr}"

    def start(self, block: Block) -> None:
        lines = block.code.replace("\\\n", " ").splitlines()  # continued lines joined
        commands = [line for line in lines if line.strip()]
        assert len(commands) == 1, f"{block.where}: one command per long-running block"
        command = self.localize(commands[0]).removeprefix("uv run ")
        log = self.folder / f"service-{block.line}.txt"
        with log.open("w") as stderr:  # env: the command may start with VARIABLE=value
            process = subprocess.Popen(["bash", "-c", f"exec env {command}"], cwd=self.folder,
                                       env=self.env, text=True, stdout=subprocess.DEVNULL,
                                       stderr=stderr)  # fmt: skip
        self.services.append((block, process, log))

        def started() -> bool:
            assert process.poll() is None, f"{block.where} ended:\n{log.read_text()}"
            return STARTED in log.read_text()

        wait_for(started, timeout=60)

    def stop_services(self) -> None:
        for block, process, log in reversed(self.services):
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=30)
            said = log.read_text()
            if ASSIGNMENTS.sub("", block.code).startswith("fairque"):
                assert code == 0, f"{block.where} exited with {code}:\n{said}"
                assert "stopped" in said, f"{block.where}: no stop line:\n{said}"
            else:
                assert code in (0, -signal.SIGTERM), f"{block.where}: {code}:\n{said}"
        self.services.clear()

    def close(self) -> None:
        for _block, process, _log in self.services:  # after a failure: by PID, ours only
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
        if self.python is not None:
            self.python.kill()
            self.python.wait(timeout=10)


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment with fairque installed from a wheel of the checkout, as
    install.md's "With pip" says, its dependencies at the versions of ``uv.lock`` (which
    uv's cache holds); its ``bin`` folder."""
    folder = tmp_path_factory.mktemp("install")
    venv, constraints = folder / "venv", folder / "constraints.txt"

    def run(*command: str | Path) -> None:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"

    run("uv", "build", "--wheel", "--quiet", "--out-dir", folder)
    run("uv", "export", "--frozen", "--all-groups", "--all-extras", "--no-hashes",
        "--no-emit-project", "--quiet", "--output-file", constraints)  # fmt: skip
    run("uv", "venv", "--quiet", "--python", sys.executable, venv)
    wheel = next(folder.glob("fairque-*.whl"))
    # Compiled to bytecode once here, as .ci/run does for the checkout: the pages start
    # dozens of fairque processes, and where PYTHONDONTWRITEBYTECODE is set (CI) each would
    # compile every module it imports from source again.
    run("uv", "pip", "install", "--quiet", "--compile-bytecode", "--python",
        venv / "bin" / "python", "--constraints", constraints,
        f"fairque[otel] @ {wheel.as_uri()}", "pytest", "pytest-asyncio")  # fmt: skip
    return venv / "bin"


@pytest.fixture
def session(tmp_path: Path, installed: Path) -> Iterator[Session]:
    home = Path(tempfile.mkdtemp(prefix="fq-docs-", dir="/tmp"))  # a short socket path
    ports = {port: str(free_port()) for port in PORTS}
    env = {**os.environ, HOME_ENV: str(home), "FAIRQUE_GRACE_SECONDS": "2"}
    env.pop("PYTHONPATH", None)
    # The installed environment, activated; the checkout's (uv run's) is left out.
    ours = str(Path(sys.executable).parent)
    paths = [path for path in env["PATH"].split(os.pathsep) if path != ours]
    env["PATH"] = os.pathsep.join([str(installed), *paths])
    env["VIRTUAL_ENV"] = str(installed.parent)
    env.update({variable: ports[port] for port, variable in PORT_ENV.items()})
    with LocalServer() as server:
        env[URL_ENV] = server.url
        running = Session(tmp_path, env, ports, installed / "python")
        try:
            yield running
        finally:
            running.close()
            stop_server(home)
            shutil.rmtree(home, ignore_errors=True)


@pytest.mark.long
@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.name)
def test_every_block_meant_to_run_runs(doc: Path, session: Session) -> None:
    blocks, _links = parse(doc)
    ran = 0
    for block in blocks:
        if block.language not in RUNNABLE:
            continue
        if "no-run" in block.flags:
            if block.language == "python":
                _run_imports(block, session)
            continue
        first = block.code.splitlines()[0] if block.code else ""
        if block.language == "python" and (named := FILE_BLOCK.match(first)):
            (session.folder / named.group(1)).write_text(block.code)
        elif block.language == "python":
            session.run_python(block)
        elif "long-running" in block.flags:
            session.start(block)
        else:
            session.run_shell(block)
        ran += 1
    session.stop_services()
    assert ran >= RUNNABLE_AT_LEAST.get(doc.name, 5)  # the examples are there, and they ran
    if doc.name == "getting-started.md":  # followed in order, it leaves nothing behind
        with FairQueue(session.env[URL_ENV]) as queue:
            states = queue.stats().states
        assert states.get(TaskState.FAILED, 0) == 0, states
        assert states.get(TaskState.QUEUED, 0) == 0, states


def _run_imports(block: Block, session: Session) -> None:
    """A block that is not run still imports only names that exist."""
    tree = ast.parse(block.code)
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    if imports:
        code = ast.unparse(ast.Module(body=list(imports), type_ignores=[]))
        session.run_python(Block(block.doc, block.line, "python", set(), code, True))


def test_every_server_configuration_shown_starts_a_server(tmp_path: Path) -> None:
    """A ``text redis-conf`` block is a redis.conf / valkey.conf as a page shows it:
    pasted into a file, it starts the server (redis.conf has no end-of-line comments)."""
    blocks = [block for doc in PAGES for block in parse(doc)[0] if "redis-conf" in block.flags]
    assert blocks, "no redis-conf block: deploy.md shows one"
    for number, block in enumerate(blocks):
        config = tmp_path / f"{number}.conf"
        config.write_text(block.code)
        with LocalServer(config=config) as server:  # raises, with its log, if it cannot start
            assert server.process is not None
            assert server.process.poll() is None, block.where


def test_what_the_install_page_says_the_version_prints_is_what_it_prints(
    installed: Path,
) -> None:
    command = installed / "fairque"  # the script the install put there
    printed = subprocess.run(
        [str(command), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert f"`{printed}`" in (ROOT / "docs" / "install.md").read_text(), printed
