"""Generates the blocking clients from the asyncio ones, as httpcore does: the asyncio
code is written by hand, and its blocking twin is the same text with ``async``/``await``
taken out and the asyncio names replaced by their blocking twins.

    uv run python tools/unasync.py          # writes the generated files
    uv run python tools/unasync.py --check  # exit 1 if one is not current (CI runs this)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Hand-written asyncio module -> generated blocking module.
FILES = {
    "fairque/queue/async_client.py": "fairque/queue/client.py",
    "fairque/jobs/async_client.py": "fairque/jobs/client.py",
    "fairque/storage/async_client.py": "fairque/storage/client.py",
    "fairque/scheduler/async_client.py": "fairque/scheduler/client.py",
    "fairque/storage/async_tarantool.py": "fairque/storage/blocking_tarantool.py",
    "fairque/engine/async_executor.py": "fairque/engine/executor.py",
    "fairque/engine/async_routes.py": "fairque/engine/blocking_routes.py",
    "fairque/runners/fair_worker/context.py": "fairque/runners/fair_worker/sync_context.py",
    "fairque/storage/async_protocol.py": "fairque/storage/protocol.py",
    "fairque/testing/context.py": "fairque/testing/sync_context.py",
}
# What an import names: a generated module's source -> the module, and the modules
# written by hand in both forms.
MODULES = {
    **{
        source[:-3].replace("/", "."): target[:-3].replace("/", ".")
        for source, target in FILES.items()
    },
    "fairque.engine.async_direct": "fairque.engine.direct",
    "redis.asyncio.cluster": "redis.cluster",
}
# In order: the asyncio names whose blocking twin is not just the name without "Async".
SUBSTITUTIONS = [
    (r"(?m)^import redis\.asyncio as aioredis$", "import redis"),
    (r"\baioredis\.", "redis."),
    (r"\bRedisCluster as AsyncRedisCluster\b", "RedisCluster"),
    (r"\bAsync(Client|Node|Route)\b", r"Sync\1"),
    (r"\bopen_async_queue\b", "open_queue"),
    (r"\bTaskContext\b", "SyncTaskContext"),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\baclose\b", "close"),
    (r"\basync (def|with|for)\b", r"\1"),
    (r"\bawait ", ""),
    (r"\bAsync([A-Z]\w*)", r"\1"),
    # A function written in both forms (x and async_x), not a module path.
    (r"(?<![.\w])async_(\w+)", r"\1"),
]


def header(source: str) -> str:
    return f"# Generated from {source} by tools/unasync.py: edit that file instead.\n"


def generate(source: str) -> str:
    """The blocking twin of ``source``, formatted as the project formats code."""
    text = re.sub(
        r"(?m)^(\s*from )([\w.]+)( import)",
        lambda match: match[1] + MODULES.get(match[2], match[2]) + match[3],
        (ROOT / source).read_text(),
    )
    for pattern, replacement in SUBSTITUTIONS:
        text = re.sub(pattern, replacement, text)
    text = header(source) + text
    # Imports sorted again (an asyncio name and its twin may sort apart), then formatted.
    for command in (["check", "--select", "I", "--fix-only", "--exit-zero"], ["format"]):
        text = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", FILES[source], "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    return text


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for source, target in FILES.items():
        generated = generate(source)
        path = ROOT / target
        if path.exists() and path.read_text() == generated:
            continue
        if check:
            stale.append(target)
        else:
            path.write_text(generated)
            print(f"wrote {target}")
    for target in stale:
        print(f"{target} is not current: run `uv run python tools/unasync.py`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
