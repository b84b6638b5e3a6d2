"""The package's import graph, read from its source.

Every ``import`` in ``scsql/**/*.py`` counts, wherever it stands: at the top
of a module, inside a function (the lazy imports that keep start-up light),
or under ``if TYPE_CHECKING``. Nothing is run; each file is parsed with
``ast``. Four rules hold over that graph:

* no cycle: modules that import each other, however far round, cannot be
  read, tested or changed one at a time;
* no cycle between packages either: the subsystems stand in layers, each
  importing only those below it (today: audit on core, coordination on
  audit, hooks on coordination, code on core, memory on hooks and code,
  distill on hooks, ops, ui, serve and bench on those);
* core stands on nothing above it: ``scsql.core`` imports only itself (and
  the package's version), and defines the types the rest is assembled
  with (``core/app.py``);
* only the entry points (``scsql/cli.py``, ``__main__.py``, ``api.py``,
  ``subsystems.py``, ``hook_server.py``) know every subsystem and build the
  bundle of them: nothing else imports them, so the subsystems (audit,
  memory, coordination, hooks, code, distill, ops, ui, serve, bench) and the modules composed of them
  (``composed.py``, ``mcp_server.py``) reach the others through their
  context.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent.parent / "scsql"
SUBSYSTEMS = ("audit", "memory", "coordination", "hooks", "code", "distill", "ops", "ui", "serve", "bench")
ENTRY_POINTS = {"scsql.cli", "scsql.__main__", "scsql.api", "scsql.subsystems", "scsql.hook_server"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, path: Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """The package's modules that module NAME (at PATH) imports, with the
    line of each import; ``from X import y`` names X.y when that is a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                target = alias.name
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target:
                    yield target, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                source = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names if source in known else ():
                sub = f"{source}.{alias.name}"
                yield (sub if sub in known else source), node.lineno


def graph() -> dict[str, dict[str, int]]:
    """Module -> {imported module: line of its first import}."""
    found = modules()
    known = set(found)
    edges: dict[str, dict[str, int]] = {}
    for name, path in found.items():
        edges[name] = {}
        for target, line in imported(name, path, known):
            if target != name:
                edges[name].setdefault(target, line)
    return edges


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def layer(name: str) -> str:
    parts = name.split(".")
    if len(parts) > 1 and parts[1] in (*SUBSYSTEMS, "core"):
        return parts[1]
    return name


def test_the_graph_is_read():
    edges = graph()
    assert "scsql.core.db" in edges["scsql.audit.signing"]  # a top-level relative import
    assert "scsql.hooks.daemon" in edges["scsql.hooks.cli"]  # an import inside a function
    assert "scsql.hooks.client" in edges["scsql.cli"]  # ``from .hooks import client``
    assert "scsql.subsystems" in edges["scsql.api"]  # ``from . import subsystems``
    assert "scsql.core.registry" in edges["scsql.core.app"]  # under ``if TYPE_CHECKING``
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]


def test_no_import_cycle():
    edges = graph()
    found = cycles(edges)
    described = []
    for component in found:
        members = set(component)
        ties = [f"    {a} -> {b} (line {line})" for a in component for b, line in sorted(edges[a].items())
                if b in members]
        described.append(f"{len(component)} modules: {', '.join(component)}\n" + "\n".join(ties))
    assert not found, "import cycles:\n" + "\n".join(described)


def test_packages_import_each_other_one_way():
    edges = graph()
    packages: dict[str, dict[str, int]] = {}
    ties: dict[tuple[str, str], str] = {}
    for a in sorted(edges):
        for b, line in sorted(edges[a].items()):
            if layer(a) != layer(b):
                packages.setdefault(layer(a), {})[layer(b)] = line
                ties.setdefault((layer(a), layer(b)), f"{a} -> {b} (line {line})")
    found = cycles(packages)
    described = [f"{', '.join(c)}: " + "; ".join(t for (a, b), t in sorted(ties.items()) if a in c and b in c)
                 for c in found]
    assert not found, "packages that import each other:\n" + "\n".join(described)


def test_core_imports_nothing_above_it():
    edges = graph()
    upward = [f"{a} -> {b} (line {line})" for a in sorted(edges) if layer(a) == "core"
              for b, line in sorted(edges[a].items()) if layer(b) != "core" and b != "scsql"]
    assert not upward, "core imports from above it:\n" + "\n".join(upward)


def test_only_entry_points_import_entry_points():
    edges = graph()
    upward = [f"{a} -> {b} (line {line})" for a in sorted(edges) if a not in ENTRY_POINTS
              for b, line in sorted(edges[a].items()) if b in ENTRY_POINTS]
    assert not upward, "an entry point is imported from below:\n" + "\n".join(upward)
