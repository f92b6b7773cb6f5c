"""The layers contract: dependencies point down, and no module imports itself back.

Every import inside ``fairque/`` is read from the source (those inside functions and
under ``TYPE_CHECKING`` too: a lazy import is a dependency all the same). Each module
belongs to one layer, top to bottom:

- the package's public face (``fairque`` and ``fairque.worker``: re-exports);
- adapters: the CLI, the HTTP services, the metrics, the tracing hooks, the demo, the
  testing helpers;
- runners (``fairque.runners``): the fair worker, the storage worker, the Manager, the
  scheduler's run loop (with seed 002's ``TaskScheduler``, the schedules' client that
  also runs an instance), the JQ master's dispatcher, what an HTTP worker runs;
- the HTTP protocol the runners speak: the bodies, the wire formats, the dispatcher's
  HTTP client and the jobs' context (modules of ``fairque.http``, whose services sit
  above);
- entry points: each one's ops, models and clients (queue, jobs, scheduler, storage);
- the engine: scripts, keys, calls, codecs, connections, executors, settings;
- the local servers (development and tests);
- the base: errors, which every layer raises, and ``with`` for what holds resources.

A module may import its own layer and the layers below it, package ``__init__`` files
too: an entry point's package does not re-export its runner (``TaskScheduler`` is
``fairque``'s and ``fairque.runners.scheduler``'s). Without a dependency tool of its own,
this is the import-linter layers contract written as a test over the import graph.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "fairque"

# (layer, the modules in it: a name covers the module and everything below it).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # fairque.worker: the fair worker's public path.
    ("public face", ("fairque", "fairque.worker")),
    (
        "adapters",
        (
            "fairque.cli",
            "fairque.http",
            "fairque.metrics",
            "fairque.otel",
            "fairque.demo",
            "fairque.testing",
        ),
    ),
    ("runners", ("fairque.runners",)),
    (
        "HTTP protocol",
        (
            "fairque.http.protocol",
            "fairque.http.wire",
            "fairque.http.connections",
            "fairque.http.context",
        ),
    ),
    ("entry points", ("fairque.queue", "fairque.jobs", "fairque.scheduler", "fairque.storage")),
    ("engine", ("fairque.engine", "fairque.config")),
    ("local servers", ("fairque.servers",)),
    ("base", ("fairque.errors", "fairque.closing", "fairque.logs")),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def layer_of(module: str) -> int:
    """The index of ``module``'s layer (0 is the top): the longest name that covers it."""
    best, found = -1, -1
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            covers = module == name or module.startswith(name + ".")
            if covers and len(name) > best:
                best, found = len(name), index
    assert found >= 0, f"{module} is in no layer: add it to LAYERS"
    return found


def imports_of(module: str) -> Iterator[str]:
    """The fairque modules ``module`` imports: ``from a.b import c`` names ``a.b.c`` when
    that is a module, else ``a.b``."""
    tree = ast.parse(MODULES[module].read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [
                f"{node.module}.{alias.name}"
                if f"{node.module}.{alias.name}" in MODULES
                else node.module
                for alias in node.names
            ]
        else:
            continue
        yield from (name for name in names if name in MODULES and name != module)


GRAPH = {module: set(imports_of(module)) for module in MODULES}


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


def upward(graph: dict[str, set[str]]) -> list[str]:
    """The imports of ``graph`` that run back up the layers."""
    return [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in graph.items()
        for target in targets
        if layer_of(target) < layer_of(module)
    ]


def test_no_import_runs_back_up_the_layers() -> None:
    assert upward(GRAPH) == []


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected components of more than one
    module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root, targets in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(targets)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_back() -> None:
    # Package __init__ files that re-export their own modules are left out: importing a
    # module of a package runs its __init__ first anyway.
    graph = {
        module: {target for target in targets if not module.startswith(target + ".")}
        for module, targets in GRAPH.items()
    }
    assert cycles(graph) == []


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
    ],
)
def test_the_cycle_finder_finds_cycles(
    graph: dict[str, set[str]], expected: list[list[str]]
) -> None:
    assert cycles(graph) == expected


def test_an_upward_import_would_be_seen() -> None:
    # What the storage worker did before it reported to an observer.
    graph = {**GRAPH, "fairque.runners.storage_worker": {"fairque.metrics"}}
    assert upward(graph) == [
        "fairque.runners.storage_worker (runners) imports fairque.metrics (adapters)"
    ]
    assert "fairque.engine.observer" in GRAPH["fairque.runners.storage_worker"]


def test_every_public_class_name_is_unique() -> None:
    """One name, one thing: a reader who meets ``TaskFailed`` or ``Done`` knows which."""
    seen: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                seen.setdefault(node.name, []).append(module)
    assert {name: where for name, where in seen.items() if len(where) > 1} == {}


def test_the_storage_backends_check_requests_in_one_place() -> None:
    """What a storage request must be is written once (fairque/storage/requests.py):
    the Redis, Tarantool and in-memory backends call none of the checks themselves."""
    for module in ("fairque.storage.ops", "fairque.storage.tarantool", "fairque.storage.memory"):
        tree = ast.parse(MODULES[module].read_text())
        called = {
            node.func.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        }
        assert not {name for name in called if name.startswith("check_")}, module
        assert "Requests" in called, module
