"""colbench's import graph has no cycle, between modules or between packages.

Every import counts: one inside a function is still a dependency (it only hides the cycle
from Python until the call), and so is one under ``if TYPE_CHECKING:`` (a reader, and the
type checker, still need the other module to follow this one). Where two modules share a
type, it moves down into one both can import, or becomes a ``Protocol`` of what is used.
Packages are nodes at every depth: ``colbench.commands`` and ``colbench.commands.gate`` are
two, and an edge runs between them whenever a module of one imports a module of the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "colbench"


def _modules(root: Path = PACKAGE) -> dict[str, Path]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imported(node: ast.AST, modules: dict[str, Path]) -> list[str]:
    """The colbench modules one import statement names (``from p import m`` names p.m
    when m is a module, else p)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        names = [
            f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
            for a in node.names
        ]
    else:
        return []
    found = []
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name.startswith("colbench"):
            found.append(name)
    return found


def module_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    modules = _modules(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            graph[name].update(t for t in _imported(node, modules) if t != name)
    return graph


def package_graph(modules: dict[str, set[str]], root: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module's own package (a top-level module is its own node)."""
    packages = {name for name, path in _modules(root).items() if path.name == "__init__.py"}

    def owner(name: str) -> str:
        if name in packages or name.count(".") == 1:
            return name
        return name.rpartition(".")[0]

    graph: dict[str, set[str]] = {}
    for source, targets in modules.items():
        for target in targets:
            a, b = owner(source), owner(target)
            # colbench/__init__.py runs before any of its modules: not a package edge.
            if a != b and "colbench" not in (a, b):
                graph.setdefault(a, set()).add(b)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert cycles(module_graph()) == []


def test_no_package_imports_one_that_imports_it_back() -> None:
    assert cycles(package_graph(module_graph())) == []


def test_at_most_five_modules_at_the_top() -> None:
    # errors, output, reading, text (the one table formatter, issue 35) and the
    # results.py shim, which goes when the results/ package arrives (issue 35).
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(set(top) - {"__init__.py", "__main__.py"}) <= 5, top


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # a function-level import still closes a cycle
        ({"a.py": "import colbench.b", "b.py": "def f():\n    from colbench import a"}, 1),
        # and so does one under TYPE_CHECKING
        (
            {
                "a.py": "import colbench.b",
                "b.py": (
                    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import colbench.a"
                ),
            },
            1,
        ),
        ({"a.py": "import colbench.b", "b.py": "x = 1"}, 0),
    ],
)
def test_the_checker_sees_a_cycle(tmp_path: Path, files: dict[str, str], expected: int) -> None:
    root = tmp_path / "colbench"
    root.mkdir()
    (root / "__init__.py").write_text("")
    for name, text in files.items():
        (root / name).write_text(text)
    assert len(cycles(module_graph(root))) == expected


def test_the_checker_sees_a_cycle_between_packages(tmp_path: Path) -> None:
    root = tmp_path / "colbench"
    for package, text in (("p", "from colbench.q import y"), ("q", "from colbench.p import z")):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
        (root / package / "x.py").write_text(text)
        (root / package / ("z.py" if package == "p" else "y.py")).write_text("")
    (root / "__init__.py").write_text("")
    graph = module_graph(root)
    assert cycles(graph) == []
    assert cycles(package_graph(graph, root)) == [["colbench.p", "colbench.q"]]
