"""docs/layout.md is the newcomer's one-page map: every package of colbench/ is on it, and
every module says what it does in its own docstring (the map does not list modules)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "colbench"
LAYOUT = PACKAGE.parent / "docs" / "layout.md"


def packages(root: Path = PACKAGE) -> set[str]:
    """Every package under ``root`` at every depth, as the map names it (``bench/ops/``)."""
    return {
        f"{init.parent.relative_to(root).as_posix()}/"
        for init in root.rglob("__init__.py")
        if init.parent != root
    }


def mapped(text: str) -> set[str]:
    """The packages the map's table names in its first column."""
    return {
        name
        for line in text.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`([\w/]+/)`", line.split("|")[1])
    }


def test_every_package_is_on_the_map() -> None:
    named = mapped(LAYOUT.read_text())
    assert sorted(packages() - named) == [], "packages missing from docs/layout.md"
    assert sorted(named - packages()) == [], "docs/layout.md names packages that do not exist"


def test_every_module_has_a_docstring() -> None:
    bare = [
        path.relative_to(PACKAGE).as_posix()
        for path in sorted(PACKAGE.rglob("*.py"))
        if not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert bare == [], "modules without a docstring"


def test_the_map_check_sees_a_subpackage(tmp_path: Path) -> None:
    (tmp_path / "analysis" / "gate").mkdir(parents=True)
    for name in ("__init__.py", "analysis/__init__.py", "analysis/gate/__init__.py"):
        (tmp_path / name).write_text("")
    assert packages(tmp_path) == {"analysis/", "analysis/gate/"}
    assert packages(tmp_path) - mapped("| `analysis/` | x |\n") == {"analysis/gate/"}
