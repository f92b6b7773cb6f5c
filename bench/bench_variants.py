"""What a piece of a script costs: server instructions per call of the script as it is and
of variants of it, counted by valgrind in one server run.

    uv run python bench/bench_variants.py OPERATION VARIANTS_FILE [--rounds 2] [--calls 200]

OPERATION is one of ``push``, ``pop``, ``named-pop`` (a worker's pop, naming its task
names), ``finish``, ``empty-pop`` and ``empty-finish``: one task per call, tasks of 50
tenants, as ``bench_instructions.py`` makes them. VARIANTS_FILE is a Python file that
defines ``VARIANTS = {label: (script, [(old, new), ...])}``: each variant is the
library of ``script`` (``queue/pop``) with each ``old`` text replaced by ``new`` (every
``old`` must occur), loaded under a name of its own. For example, to cost the counters
of a push, replace ``local function flush_counters()`` by a function that returns at
once. Each round measures the script as it is ("base") and then each variant, on a
namespace of its own warmed up the same way, so the machine's state falls on all of
them alike; a variant that changes what later calls find (a pop that writes nothing
back) measures something else than its label says: prefer variants that leave the
data as the script would. Prints the instructions per call of each round; asserts
nothing. A server under valgrind runs ~50x slower: the figures are counts, never rates.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import runpy
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from callgrind import CountedServer

from fairque import FairQueue, Task
from fairque.engine.calls import Call
from fairque.engine.scripts import Script, load
from fairque.queue.calls import leases, push
from fairque.queue.models import LeasedTask
from fairque.servers.embedded import free_port, valkey_binary

TENANTS = 50
NAME = "send_email"
OPERATIONS = ("push", "pop", "named-pop", "finish", "empty-pop", "empty-finish")
Variants = dict[str, tuple[str, list[tuple[str, str]]]]


def variant_of(script: Script, replacements: list[tuple[str, str]]) -> Script:
    """``script`` with its library's texts replaced, as a function of its own name."""
    code = script.library.split("\n", 1)[1]  # without the `#!lua name=` line
    for old, new in replacements:
        if old not in code:
            raise SystemExit(f"bench_variants: {script.name} holds no {old!r}")
        code = code.replace(old, new)
    digest = hashlib.sha1(code.encode()).hexdigest()
    function = f"fq_variant_{digest}"
    code = code.replace(script.function, function)
    return dataclasses.replace(
        script, function=function, sha=digest, library=f"#!lua name={function}\n{code}"
    )


def task(i: int) -> Task:
    return Task(user_id=f"tenant-{i % TENANTS}", name=NAME, payload={"n": i})


class Measurement:
    """One operation's calls on one namespace, with ``script`` in place of its own."""

    def __init__(self, server: CountedServer, namespace: str, script: Script | None) -> None:
        self.server = server
        self.queue = FairQueue(server.url, namespace)
        self.namespace = self.queue.namespace
        self.script = script
        warm = [task(i) for i in range(TENANTS)]  # settings written, tenants known
        self.queue.push_many(warm)
        self.queue.finish_many(self.queue.pop(count=TENANTS, worker_id="bench"))

    def send(self, call: Call[Any]) -> Any:
        """``call``, with the variant's script if it is the script the variant changes."""
        if self.script is not None and call.script.name == self.script.name:
            call = dataclasses.replace(call, script=self.script)
        return self.queue.executor.execute(call)

    def pop(self, names: list[str] | None) -> list[LeasedTask]:
        leased: list[LeasedTask] = self.send(
            leases.pop(self.namespace, 1, worker_id="bench", names=names)
        )
        return leased

    def count(self, operation: str, calls: int, label: str) -> float:
        """Instructions per call of ``calls`` calls of ``operation`` (one made first,
        uncounted, so that the variant's library is loaded outside the count)."""
        work: Callable[[], object]
        if operation == "push":
            self.send(push.push_one(self.namespace, task(calls)))
            work = lambda: [self.send(push.push_one(self.namespace, task(i))) for i in range(calls)]  # noqa: E731
        else:
            self.queue.push_many([task(i) for i in range(calls + 1)])
            names = [NAME] if operation == "named-pop" else None
            if operation in ("pop", "named-pop"):
                self.pop(names)
                work = lambda: [self.pop(names) for _ in range(calls)]  # noqa: E731
            else:
                leased = self.queue.pop(count=calls + 1, worker_id="bench")
                if operation == "finish":
                    self.send(leases.finish(self.namespace, leased[:1]))
                    ns = self.namespace
                    work = lambda: [self.send(leases.finish(ns, [one])) for one in leased[1:]]  # noqa: E731
                else:
                    self.queue.finish_many(leased)
                    if operation == "empty-pop":
                        self.pop(None)
                        work = lambda: [self.pop(None) for _ in range(calls)]  # noqa: E731
                    else:
                        self.send(leases.finish(self.namespace, []))
                        ns = self.namespace
                        work = lambda: [self.send(leases.finish(ns, [])) for _ in range(calls)]  # noqa: E731
        try:
            return self.server.measure(label, work) / calls
        finally:
            self.queue.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("operation", choices=OPERATIONS)
    parser.add_argument("variants", type=Path, help="a Python file defining VARIANTS")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--calls", type=int, default=200)
    options = parser.parse_args()
    if shutil.which("callgrind_control") is None:
        print("bench_variants: valgrind is not installed (apt-get install valgrind)",
              file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    variants: Variants = runpy.run_path(str(options.variants))["VARIANTS"]
    scripts: dict[str, Script | None] = {"base": None}
    for label, (name, replacements) in variants.items():
        scripts[label] = variant_of(load(name), replacements)
    counts: dict[str, list[float]] = {label: [] for label in scripts}
    with tempfile.TemporaryDirectory() as folder:
        server = CountedServer(str(valkey_binary()), Path(folder), free_port())
        try:
            for round_number in range(options.rounds):
                for i, (label, script) in enumerate(scripts.items()):
                    namespace = f"variants-{round_number}-{i}"
                    measurement = Measurement(server, namespace, script)
                    counts[label].append(
                        measurement.count(options.operation, options.calls, namespace)
                    )
        finally:
            server.stop()
    print(f"{options.operation}, one task per call, {TENANTS} tenants: server instructions "
          "per call, each round")  # fmt: skip
    for label, figures in counts.items():
        print(f"{label:50}" + "".join(f"{figure / 1000:>9.1f}k" for figure in figures))


if __name__ == "__main__":
    main()
