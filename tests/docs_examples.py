"""The example commands of README.md and docs/*.md, found by the fences of their code blocks.

The convention (docs/development.md, "Docs that run"):

- ``console``: runs on a CPU. Each line ``$ colbench ...`` is a command; the lines below it,
  up to the next ``$``, are what it printed. tests/dist/test_docs_examples.py runs them.
- ``sh``: needs GPUs, a cluster or files of your own; every ``colbench`` and ``make``
  command in it is checked for validity by tests/unit/test_docs.py, not run.
- ``text``, ``yaml``, ``python``: output, files and code; not commands.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LANGUAGES = ("console", "sh", "text", "yaml", "python")


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(REPO)}:{line}"


@dataclass(frozen=True)
class Block:
    """One fenced code block: its language and its lines, ``line`` being the first's number."""

    path: Path
    line: int
    language: str
    lines: tuple[str, ...]


def blocks(path: Path) -> list[Block]:
    found: list[Block] = []
    opened: tuple[int, str] | None = None
    body: list[str] = []
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if not text.startswith("```"):
            if opened is not None:
                body.append(text)
            continue
        if opened is None:
            opened, body = (number + 1, text[3:].strip()), []
        else:
            found.append(Block(path, opened[0], opened[1], tuple(body)))
            opened = None
    if opened is not None:
        raise ValueError(f"{where(path, opened[0] - 1)}: code block never closed")
    return found


def all_blocks() -> list[Block]:
    return [block for path in doc_files() for block in blocks(path)]


@dataclass(frozen=True)
class Example:
    """A ``$ colbench ...`` line of a console block and the output shown below it."""

    path: Path
    line: int
    argv: tuple[str, ...]
    output: tuple[str, ...]


def console_examples(block: Block) -> list[Example]:
    """The commands of a console block, in order; a line before the first ``$`` is refused."""
    examples: list[Example] = []
    for offset, text in enumerate(block.lines):
        if text.startswith("$ "):
            argv = tuple(shlex.split(text[2:]))
            examples.append(Example(block.path, block.line + offset, argv, ()))
        elif not examples:
            raise ValueError(f"{where(block.path, block.line + offset)}: output before a $ line")
        else:
            last = examples[-1]
            examples[-1] = Example(last.path, last.line, last.argv, (*last.output, text))
    return examples


def shell_commands(block: Block) -> list[tuple[int, list[str]]]:
    """Each command line of an sh block as (line number, words): continuations joined,
    comments dropped."""
    commands: list[tuple[int, list[str]]] = []
    pending, start = "", 0
    for offset, text in enumerate(block.lines):
        if not pending:
            start = block.line + offset
        if text.rstrip().endswith("\\"):
            pending += text.rstrip()[:-1] + " "
            continue
        words = shlex.split(pending + text, comments=True)
        pending = ""
        if words:
            commands.append((start, words))
    return commands


def colbench_args(words: list[str]) -> list[str] | None:
    """The arguments given to colbench in a command line (``colbench sweep ...``,
    ``srun ... colbench sweep ...``, ``torchrun ... -m colbench sweep ...``), or None."""
    for index, word in enumerate(words):
        if word == "colbench" or word.endswith("/colbench"):
            return words[index + 1 :]
    return None


# A number standing alone: not the digits inside a word (float32, all_reduce2) nor the
# tail of a dotted version. Signs belong to the number (a change may go either way), and
# so do the table's marks after a time (* host-bound, ! rank skew): they vary as it does.
# A fitted rate is `inf` when time did not grow with size in that run: a value like any.
_NUMBER = re.compile(r"(?<![\w.])(?:[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?[*!]*|inf\b)")
# The table's rank lines name the host that ran them.
_HOST = re.compile(r"( on) +\S+( device)")
# A `# node` line gives the machine's own NICs and CPU model: another machine's differ.
_NODE = re.compile(r"^(\s*# node )\S+: .*$")


def shape(line: str) -> str:
    """A line with its numbers and host name blanked and its spacing collapsed: what
    stays the same between two runs of one command."""
    line = _NODE.sub(r"\1<host>: <its NICs and CPU>", _HOST.sub(r"\1 <host>\2", line))
    return " ".join(_NUMBER.sub("<n>", line).split())


def _line_matches(expected: str, actual: str) -> bool:
    want, got = shape(expected), shape(actual)
    if want.endswith("..."):
        return got.startswith(want[:-3].rstrip())
    return want == got


def shape_mismatch(expected: tuple[str, ...], actual: list[str]) -> str | None:
    """None when ``actual`` has the shape of ``expected``, else what differs first.

    A line ``...`` in ``expected`` stands for any lines (none included); ``...`` at the end
    of a line for the rest of that line."""

    def match(i: int, j: int) -> bool:
        if i == len(expected):
            return j == len(actual)
        if expected[i].strip() == "...":
            return any(match(i + 1, k) for k in range(j, len(actual) + 1))
        return j < len(actual) and _line_matches(expected[i], actual[j]) and match(i + 1, j + 1)

    if match(0, 0):
        return None
    for i, (want, got) in enumerate(zip(expected, actual, strict=False)):
        if want.strip() == "...":
            return f"the lines after line {i + 1} of the shown output do not match"
        if not _line_matches(want, got):
            return f"line {i + 1}: shown {want.strip()!r}, printed {got.strip()!r}"
    return f"shown {len(expected)} lines, printed {len(actual)}"


def prose(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the lines outside code blocks."""
    lines, inside = [], False
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if text.startswith("```"):
            inside = not inside
        elif not inside:
            lines.append((number, text))
    return lines


_LINK = re.compile(r"\]\(([^)\s]+)\)")
_INLINE_CODE = re.compile(r"`[^`]*`")


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every Markdown link and image outside code."""
    return [
        (number, target)
        for number, text in prose(path)
        for target in _LINK.findall(_INLINE_CODE.sub("", text))
    ]


def anchors(path: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped,
    spaces as hyphens."""
    found = set()
    for _, text in prose(path):
        if text.startswith("#"):
            title = text.lstrip("#").strip().lower()
            found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found
