"""No module of the API imports another that (directly or through others) imports it back:
the application context is one small module (``api.context``), not a route module that
every other one leans on. Importing ``api.pages.x`` runs ``api/pages/__init__.py`` too, so
a package counts as importing what its ``__init__`` imports."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from configs.paths import REPO_ROOT

PACKAGE = "api"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _known() -> dict[str, Path]:
    return {_module_name(p): p for p in (REPO_ROOT / PACKAGE).rglob("*.py")}


def _imported(tree: ast.AST, known: dict[str, Path]) -> Iterator[str]:
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                yield name
                parent = name.rpartition(".")[0]
                while parent:  # importing a submodule runs its packages' __init__
                    yield parent
                    parent = parent.rpartition(".")[0]


def _graph() -> dict[str, set[str]]:
    known = _known()
    return {
        name: {m for m in _imported(ast.parse(path.read_text()), known) if m != name}
        for name, path in known.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_no_api_module_imports_itself_back() -> None:
    graph = _graph()
    assert "api.context" in graph and len(graph) > 25
    assert _cycles(graph) == []
