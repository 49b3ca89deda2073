"""Move colbench's modules into issue 35's package shape, as one script-made, pure move.

Run from a clean checkout of main (about 10 s)::

    .venv/bin/python scripts/move_packages.py --commit

It makes two commits: the pure move, then the one-page docs/layout.md that describes the
moved tree with its test (tests/unit/test_docs.py's per-module check fails between the two:
the move adds packages its table does not name). Without ``--commit`` it stages the move
only, and ``--layout`` stages the second step; ``--dry-run`` prints the moves.

Bodies are not edited by hand: the script ``git mv``s every file of ``MOVES`` and then
rewrites, in every tracked text file outside the data folders, what names a moved module:
``import``/``from`` statements (``from colbench.sweep import timing, parent`` splits in
two; a renamed module keeps its old local name with ``as``), dotted names anywhere
(monkeypatch targets, ``python -m``, pyproject, Makefile, docstrings), and file paths
(``colbench/store/rundir.py``, and the short ``store/rundir.py`` the docs use). It then
sorts the rewritten imports, breaks the comment and docstring lines the longer names pushed
past 100 columns, and formats the touched files with ruff. Three ``__init__`` files are
written, not moved: the docstrings of the new ``bench/`` and ``commands/``, and
``results/__init__.py``, which takes over the ``colbench/results.py`` shim so that
``from colbench.results import load`` keeps working.

Why the map is what it is (an edge in tests/unit/test_import_graph.py is between packages,
a subpackage being a package of its own):
- ``bench/`` is what runs inside every rank: ops, timers, the side group, skew, the plan
  and the per-size loop (``sweep/bench.py`` becomes ``bench/loop.py``). It imports the host
  (faults, in-flight, watchdog) and results, never the sweep's command side.
- ``host/`` is ``run/``; ``launch/`` becomes ``host/launchers/``, a subpackage, because
  results' row schema reads ``launch/emulation.py`` and the host writes results: one flat
  package would be a cycle.
- ``results/`` is ``store/``; ``report/`` becomes ``results/reporters/`` (a subpackage: the
  reporters read hardware/, and hardware/ reads results' metadata).
- ``commands/<name>/`` is each command's own package; the sweep's parent side (command,
  parent, lead, task, probe, interleave) is ``commands/sweep/``.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent / "move_packages"

#: old path -> new path, relative to the repository; a folder moves with every file in it.
MOVES: tuple[tuple[str, str], ...] = (
    # The rank side.
    ("colbench/ops/", "colbench/bench/ops/"),
    ("colbench/sweep/bench.py", "colbench/bench/loop.py"),
    ("colbench/sweep/timing.py", "colbench/bench/timing.py"),
    ("colbench/sweep/groups.py", "colbench/bench/groups.py"),
    ("colbench/sweep/skew.py", "colbench/bench/skew.py"),
    ("colbench/sweep/schedstat.py", "colbench/bench/schedstat.py"),
    ("colbench/sweep/plan.py", "colbench/bench/plan.py"),
    ("colbench/sweep/memory.py", "colbench/bench/memory.py"),
    ("colbench/sweep/load.py", "colbench/bench/load.py"),
    ("colbench/sweep/rows.py", "colbench/bench/rowmaker.py"),
    # The host.
    ("colbench/run/", "colbench/host/"),
    ("colbench/launch/", "colbench/host/launchers/"),
    # Results.
    ("colbench/store/results.py", "colbench/results/rows.py"),
    ("colbench/store/", "colbench/results/"),
    ("colbench/report/reporters.py", "colbench/results/reporters/stream.py"),
    ("colbench/report/", "colbench/results/reporters/"),
    # Commands.
    ("colbench/sweep/", "colbench/commands/sweep/"),
    ("colbench/p2p/", "colbench/commands/p2p/"),
    ("colbench/health/", "colbench/commands/health/"),
    ("colbench/replay/", "colbench/commands/replay/"),
    ("colbench/crosscheck/", "colbench/commands/crosscheck/"),
    ("colbench/predict/", "colbench/commands/predict/"),
    ("colbench/references/", "colbench/commands/references/"),
)

#: The shim folded into the new results package's __init__ (its dotted name stays).
SHIM = "colbench/results.py"

#: Packages the move creates, with the docstring each one's __init__ gets; and the sweep's,
#: whose docstring listed the rank side that moves to bench/ (it holds nothing else).
NEW_PACKAGES = {
    "colbench/commands/sweep/__init__.py": (
        '"""``colbench sweep`` and ``colbench run``: options to config, variants, interleaved '
        "worlds,\nthe NCCL probe, the sweep as a task of the host and rank 0's lead; the "
        'measuring is\n:mod:`colbench.bench`\'s."""\n'
    ),
    "colbench/bench/__init__.py": (
        '"""The rank side, used by every measuring command: the ops (one contract, one file '
        "per op),\nthe timers, the side group, skew, the plan and the per-size loop "
        '(:mod:`.loop`). It knows\nno command."""\n'
    ),
    "colbench/commands/__init__.py": (
        '"""One package per command: its options, ``run(...) -> int`` and its text; the '
        'CLI\n(:mod:`colbench.cli`) declares the commands from them."""\n'
    ),
}

#: The new results/__init__: the store's docstring, then the shim's public path.
RESULTS_INIT = '''\
"""The files of a run: tables declared once and versioned (old files filled in), the run
directory that owns them, meta.json, and the reporters (:mod:`.reporters`) that write rows.

``from colbench.results import load`` is the public path to load results (docs/output.md).
"""

from colbench.results.rows import KEY_COLUMNS, Row, load

__all__ = ["KEY_COLUMNS", "Row", "load"]
'''

#: Text files whose references are rewritten: by suffix, and by name.
TEXT_SUFFIXES = {".py", ".md", ".toml", ".cfg", ".ini", ".txt", ".sh", ".yaml", ".yml", ".json"}
TEXT_NAMES = {"Makefile", "run"}
#: Data is what colbench read or wrote once: it is not rewritten.
SKIP_PREFIXES = ("tests/data/", "results/", "scripts/move_packages")


def git(*args: str, capture: bool = False) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, check=True, text=True, capture_output=capture)
    return done.stdout if capture else ""


def tracked() -> list[str]:
    return git("ls-files", capture=True).splitlines()


def file_moves(files: list[str]) -> dict[str, str]:
    """Every tracked file that moves, old path -> new path; the first entry that names a
    file (or a folder above it) wins, so a renamed file is listed before its folder."""
    moves: dict[str, str] = {}
    for path in files:
        for old, new in MOVES:
            if old.endswith("/") and path.startswith(old):
                moves[path] = new + path[len(old) :]
                break
            if path == old:
                moves[path] = new
                break
    return moves


def dotted(path: str) -> str | None:
    if not path.endswith(".py"):
        return None
    parts = path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def module_map(moves: dict[str, str]) -> dict[str, str]:
    names = {}
    for old, new in moves.items():
        old_name, new_name = dotted(old), dotted(new)
        if old_name and new_name and old_name != new_name:
            names[old_name] = new_name
    return names


def path_map(moves: dict[str, str]) -> dict[str, str]:
    """Files, and folders that move as a whole (``colbench/run/`` -> ``colbench/host/``)."""
    paths = dict(moves)
    for old, new in MOVES:
        if old.endswith("/") and all(moves[p].startswith(new) for p in moves if p.startswith(old)):
            paths[old] = new
    paths[SHIM] = "colbench/results/__init__.py"
    return paths


class Rewriter:
    def __init__(self, modules: dict[str, str], paths: dict[str, str], existing: set[str]):
        self.modules = modules
        self.paths = paths
        # Every module name before the move: ``from p import m`` names a module when p.m is one.
        self.existing = existing
        self.dotted_re = re.compile(r"(?<![\w.])colbench(?:\.\w+)+")
        short = {p[len("colbench/") :]: n[len("colbench/") :] for p, n in paths.items()}
        short = {p: n for p, n in short.items() if p.endswith(".py") and "/" in p}
        self.short = short
        alternatives = "|".join(re.escape(p) for p in sorted(paths, key=len, reverse=True))
        self.path_re = re.compile(rf"(?<![\w/.-])(?:{alternatives})")
        short_alts = "|".join(re.escape(p) for p in sorted(short, key=len, reverse=True))
        self.short_re = re.compile(rf"(?<![\w/.-])(?:{short_alts})(?![\w/])")
        self.unhandled: list[str] = []

    def name(self, full: str) -> str:
        """The new dotted name: the longest moved prefix, the rest (attributes) kept."""
        parts = full.split(".")
        for end in range(len(parts), 1, -1):
            head = ".".join(parts[:end])
            if head in self.modules:
                return ".".join([self.modules[head], *parts[end:]])
        return full

    def import_from(self, node: ast.ImportFrom, indent: str) -> str | None:
        """``from p import a, b`` rewritten, one statement per new source; None if unchanged."""
        assert node.module is not None
        groups: dict[str, list[str]] = {}
        for alias in node.names:
            full = f"{node.module}.{alias.name}"
            if full in self.existing and full in self.modules:
                new_parent, _, new_leaf = self.modules[full].rpartition(".")
                local = alias.asname or alias.name
                item = new_leaf if local == new_leaf else f"{new_leaf} as {local}"
                groups.setdefault(new_parent, []).append(item)
            else:
                item = alias.name if alias.asname is None else f"{alias.name} as {alias.asname}"
                groups.setdefault(self.name(node.module), []).append(item)
        if list(groups) == [node.module] and all(
            f"{node.module}.{a.name}" not in self.modules for a in node.names
        ):
            return None
        lines = [f"from {source} import {', '.join(items)}" for source, items in groups.items()]
        return ("\n" + indent).join(lines)

    def python(self, text: str, where: str) -> str:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            self.unhandled.append(f"{where}: not parsed, dotted names only")
            return text
        lines = text.splitlines(keepends=True)
        edits = []
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and node.module
                and (node.module == "colbench" or node.module.startswith("colbench."))
            ):
                indent = lines[node.lineno - 1][: node.col_offset]
                new = self.import_from(node, indent)
                if new is None:
                    continue
                end, end_col = node.end_lineno, node.end_col_offset
                assert end is not None and end_col is not None
                # A comment after the statement is kept; one inside it would be lost.
                inside = "".join(lines[node.lineno - 1 : end - 1]) + lines[end - 1][:end_col]
                if "#" in inside:
                    self.unhandled.append(f"{where}:{node.lineno}: comment dropped from an import")
                edits.append((node.lineno, end, node.col_offset, end_col, new))
        for start, end, col, end_col, new in sorted(edits, reverse=True):
            head = lines[start - 1][:col]
            tail = lines[end - 1][end_col:]
            lines[start - 1 : end] = [head + new + tail]
        return "".join(lines)

    def text(self, text: str, where: str) -> str:
        if where.endswith(".py"):
            text = self.python(text, where)
        text = self.dotted_re.sub(lambda m: self.name(m.group(0)), text)
        text = self.path_re.sub(lambda m: self.paths[m.group(0)], text)
        return self.short_re.sub(lambda m: self.short[m.group(0)], text)


LINE_LENGTH = 100


def _split(text: str, number: int) -> str:
    """``text`` with line ``number`` broken at its last space before the limit inside a
    comment or a string: a longer dotted name made it long. Unchanged if none fits."""
    lines = text.splitlines(keepends=True)
    line = lines[number - 1]
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        (first, col), (last, end_col) = token.start, token.end
        if token.type not in (tokenize.COMMENT, tokenize.STRING) or not first <= number <= last:
            continue
        opening = re.match(r"[A-Za-z]*('''|\"\"\"|'|\"|# ?)", token.string)
        low = col + len(opening.group(0)) if first == number and opening else 0
        high = end_col if last == number else len(line)
        cut = line.rfind(" ", low + 1, min(high, LINE_LENGTH))
        if cut <= 0 or not line[:cut].strip():
            continue
        if token.type == tokenize.COMMENT:
            lines[number - 1] = f"{line[:cut]}\n{' ' * col}# {line[cut + 1 :]}"
        elif first != last:  # a line of a triple-quoted string (a docstring)
            indent = line[: len(line) - len(line.lstrip())]
            lines[number - 1] = f"{line[:cut]}\n{indent}{line[cut + 1 :]}"
        else:  # two literals side by side, the second on the next line
            assert opening is not None
            quote, again = opening.group(1), opening.group(0)
            lines[number - 1] = f"{line[: cut + 1]}{quote}\n{' ' * col}{again}{line[cut + 1 :]}"
        return "".join(lines)
    return text


def wrap_long_lines(paths: list[str]) -> None:
    """Break the lines the longer names pushed past ruff's limit (E501), a few rounds."""
    ruff = [sys.executable, "-m", "ruff"]
    for _ in range(4):
        check = [*ruff, "check", "-q", "--select", "E501", "--output-format", "json"]
        found = subprocess.run([*check, *paths], cwd=REPO, text=True, capture_output=True)
        errors = json.loads(found.stdout or "[]")
        if not errors:
            return
        by_file: dict[str, list[int]] = {}
        for error in errors:
            by_file.setdefault(error["filename"], []).append(error["location"]["row"])
        for name, rows in by_file.items():
            path = Path(name)
            text = path.read_text(encoding="utf-8")
            for row in sorted(rows, reverse=True):
                text = _split(text, row)
            path.write_text(text, encoding="utf-8")
        subprocess.run([*ruff, "format", "-q", *paths], cwd=REPO, check=True)


def is_text(path: str) -> bool:
    p = Path(path)
    if path.startswith(SKIP_PREFIXES):
        return False
    return p.suffix in TEXT_SUFFIXES or p.name in TEXT_NAMES


def move(dry_run: bool) -> None:
    if git("status", "--porcelain", "--untracked-files=no", capture=True).strip():
        sys.exit("move_packages: the working tree is not clean; commit or stash first")
    files = tracked()
    moves = file_moves(files)
    if not moves:
        sys.exit("move_packages: nothing to move (already moved?)")
    modules = module_map(moves)
    modules["colbench.results"] = "colbench.results"  # the shim's name is the new package's
    existing = {name for f in files if (name := dotted(f))}
    for old, new in sorted(moves.items()):
        print(f"{old} -> {new}")
    if dry_run:
        return
    shim_body = (REPO / SHIM).read_text()
    for old, new in moves.items():
        (REPO / new).parent.mkdir(parents=True, exist_ok=True)
        git("mv", old, new)
    git("rm", "-q", SHIM)
    del shim_body  # its content is RESULTS_INIT's second half
    (REPO / "colbench/results/__init__.py").write_text(RESULTS_INIT)
    for path, body in NEW_PACKAGES.items():
        (REPO / path).write_text(body)
    for old, _ in MOVES:
        folder = REPO / old
        if old.endswith("/") and folder.is_dir() and not any(folder.rglob("*.py")):
            # Only __pycache__ is left: it would import as a namespace package.
            shutil.rmtree(folder)
    rewriter = Rewriter(modules, path_map(moves), existing)
    touched = []
    for path in tracked() + list(NEW_PACKAGES):
        if not is_text(path) or not (REPO / path).is_file():
            continue
        before = (REPO / path).read_text(encoding="utf-8")
        after = rewriter.text(before, path)
        if after != before:
            (REPO / path).write_text(after, encoding="utf-8")
            touched.append(path)
    python = [p for p in touched if p.endswith(".py")]
    ruff = [sys.executable, "-m", "ruff"]
    subprocess.run([*ruff, "check", "-q", "--fix", "--select", "I", *python], cwd=REPO)
    subprocess.run([*ruff, "format", "-q", *python], cwd=REPO, check=True)
    wrap_long_lines(python)
    git("add", "-A", "colbench", "tests", "benchmarks", "docs", "scripts")
    git("add", "-u")
    print(f"moved {len(moves)} files, rewrote {len(touched)}", file=sys.stderr)
    for note in rewriter.unhandled:
        print(f"move_packages: {note}", file=sys.stderr)


MOVE_MESSAGE = """Move into bench/ host/ results/ commands/: a pure move (scripts/move_packages.py)

git mv of every file in the script's MOVES; references rewritten by the script (imports,
dotted names, file paths; long lines broken), colbench/results.py folded into
colbench/results/__init__.py. No body edited by hand."""
LAYOUT_MESSAGE = """docs/layout.md: one page of packages and the flow between them

The per-module tables and tests/unit/test_docs.py's check of them give way to
tests/unit/test_layout_map.py: every package on the map, every module with a docstring
(colbench/__main__.py gets one). Made by scripts/move_packages.py --layout."""

LAYOUT_TESTS = ("layout_names", "package_members")
#: The one module without a docstring (the map leaves what a module does to its docstring).
MAIN_DOC = '"""``python -m colbench``: the same command line as ``colbench``."""\n\n'


def layout() -> None:
    """docs/layout.md becomes the one-page map; its per-module test gives way to one that
    checks every package is on the map and every module has a docstring."""
    if not (REPO / "colbench/bench").is_dir():
        sys.exit("move_packages --layout: run the move first")
    shutil.copyfile(HERE / "layout.md", REPO / "docs/layout.md")
    shutil.copyfile(HERE / "test_layout_map.py", REPO / "tests/unit/test_layout_map.py")
    main = REPO / "colbench/__main__.py"
    if not ast.get_docstring(ast.parse(main.read_text())):
        main.write_text(MAIN_DOC + main.read_text())
    docs_test = REPO / "tests/unit/test_docs.py"
    text = docs_test.read_text()
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    for node in sorted(tree.body, key=lambda n: n.lineno, reverse=True):
        if isinstance(node, ast.FunctionDef) and (
            node.name in LAYOUT_TESTS or (node.name.startswith("test_") and "layout" in node.name)
        ):
            assert node.end_lineno is not None
            del lines[node.lineno - 1 : node.end_lineno]
    docs_test.write_text("".join(lines))
    ruff = [sys.executable, "-m", "ruff"]
    subprocess.run([*ruff, "check", "-q", "--fix", str(docs_test)], cwd=REPO)
    subprocess.run([*ruff, "format", "-q", str(docs_test)], cwd=REPO, check=True)
    git("add", "docs/layout.md", "tests/unit/test_layout_map.py", "tests/unit/test_docs.py")
    git("add", "colbench/__main__.py")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the moves only")
    parser.add_argument("--layout", action="store_true", help="the map page and its test")
    parser.add_argument("--commit", action="store_true", help="move and map, one commit each")
    args = parser.parse_args()
    if args.layout:
        layout()
        return
    move(args.dry_run)
    if args.commit and not args.dry_run:
        git("commit", "-q", "-m", MOVE_MESSAGE)
        layout()
        git("commit", "-q", "-m", LAYOUT_MESSAGE)
        print(git("log", "--oneline", "-2", capture=True), end="")


if __name__ == "__main__":
    main()
