"""Finding nccl-tests' tables in a log, before anything is interpreted.

A log is read line by line: launcher prefixes are stripped, ``NCCL INFO`` noise is
skipped, ``#`` lines set the context (rank lines, the -b/-e/-f header, the *_perf
name, versions) and each table collects the data lines under its header.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from colbench.importers.nccl_world import WorldEvidence
from colbench.nccl.lines import strip_prefixes

_RANK = re.compile(
    r"^Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[([^\]]*)\]\s*(.*)$"
)
_PARAMS = re.compile(
    r"minBytes\s+(?P<min_bytes>\d+)\s+maxBytes\s+(?P<max_bytes>\d+)\s+step:\s*(?P<step>\d+)"
    r"\((?P<step_kind>factor|bytes)\)\s+warmup iters:\s*(?P<warmup>\d+)\s+iters:\s*(?P<iters>\d+)"
)
_REDUCED_MAX = re.compile(r"Reducing maxBytes to (\d+)")
_PERF_NAME = re.compile(r"(?:^|[\s/])([a-z][a-z0-9_]*?)_perf(?:_mpi)?\b")
_VERSIONS = (
    ("nccl-tests", re.compile(r"nccl-tests version (\S+)")),
    ("rccl-tests", re.compile(r"rccl-tests version (\S+)")),
    ("nccl", re.compile(r"^NCCL version (\S+)")),
    ("rccl", re.compile(r"^RCCL version\s*:\s*(\S+)")),
)
_OUT_OF_BOUNDS = re.compile(r"^Out of bounds values\s*:\s*(\d+)")
_INT = re.compile(r"^\d+$")


@dataclass
class RawTable:
    """One table as found in the log, before interpretation."""

    header_line: int
    columns: list[str]
    op_hint: str | None
    ranks: dict[int, tuple[str, str, str]]
    params: dict[str, int | str]
    world: WorldEvidence
    lines: list[tuple[int, list[str]]] = field(default_factory=list)
    out_of_bounds: int | None = None


@dataclass
class Scan:
    """What a log holds: its tables, the versions it names, the rows that look broken."""

    tables: list[RawTable] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


#: Header columns whose cells are words, not numbers.
_WORD_COLUMNS = frozenset({"type", "redop"})


def _readable(column: str, token: str) -> bool:
    """Whether a data cell can be what its column holds: a word, N/A, or a number."""
    if column in _WORD_COLUMNS or token == "N/A":
        return True
    try:
        float(token)
    except ValueError:
        return False
    return True


def scan(text: str, source: str) -> Scan:
    """Find the tables, the versions and the rows that look broken."""
    scanner = _Scanner(source)
    for line_no, raw in enumerate(text.splitlines(), 1):
        scanner.feed(line_no, raw)
    return scanner.found


class _Scanner:
    """The context a line is read in: what the lines above it said."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.found = Scan()
        #: rank -> (host, device name, the GPU's bus id as printed: 0000:1b:00 or 0x1b).
        self.ranks: dict[int, tuple[str, str, str]] = {}
        self.params: dict[str, int | str] = {}
        self.op_hint: str | None = None
        #: The table data lines go to; None outside a table.
        self.table: RawTable | None = None
        #: Clues to the world size seen since the last table's header.
        self.world = WorldEvidence()

    def feed(self, line_no: int, raw: str) -> None:
        line = strip_prefixes(raw).strip()
        if line:
            self.world.observe(line)
        if not line or "NCCL INFO" in line or "NCCL WARN" in line:
            return
        if line.startswith("#"):
            self._comment(line_no, line.lstrip("#").strip())
        elif not self._data(line_no, line.split()):
            self._names(line)

    def _comment(self, line_no: int, body: str) -> None:
        tokens = body.split()
        if body.startswith("Using devices"):
            self.ranks = {}
        elif match := _RANK.match(body):
            self.ranks[int(match[1])] = (match[2], match[4].strip(), match[3].strip())
        elif match := _PARAMS.search(body):
            found = match.groupdict()
            self.params = {k: v if k == "step_kind" else int(v) for k, v in found.items()}
        elif match := _REDUCED_MAX.search(body):
            self.params = {**self.params, "max_bytes": int(match.group(1))}
        elif tokens[:3] == ["size", "count", "type"]:
            self.table = RawTable(
                line_no, tokens, self.op_hint, dict(self.ranks), dict(self.params), self.world
            )
            self.found.tables.append(self.table)
            self.world = WorldEvidence()
        elif match := _OUT_OF_BOUNDS.match(body):
            if self.table is not None:
                self.table.out_of_bounds = int(match.group(1))
            self.table = None
        elif body.startswith(("Avg bus bandwidth", "Collective test concluded")):
            self.table = None
        self._names(body)

    def _data(self, line_no: int, tokens: list[str]) -> bool:
        """Take a table's data line; False when the line is not one."""
        table = self.table
        if table is None or not _INT.match(tokens[0]) or len(tokens) < 2:
            return False
        if not _INT.match(tokens[1]):
            return False
        garbled = next(
            (t for c, t in zip(table.columns, tokens, strict=False) if not _readable(c, t)), None
        )
        if garbled is not None and len(tokens) == len(table.columns):
            # A stray byte in a copied log ("6\x1439"): the row is skipped, not misread.
            self.found.warnings.append(
                f"{self.source} line {line_no}: {garbled!r} is not a number; row skipped"
            )
        elif len(tokens) == len(table.columns):
            table.lines.append((line_no, tokens))
        else:
            self.found.warnings.append(
                f"{self.source} line {line_no}: {len(tokens)} fields where the header has "
                f"{len(table.columns)}; row skipped"
            )
        return True

    def _names(self, text: str) -> None:
        """Versions and the *_perf binary's name, wherever a line mentions them."""
        for name, pattern in _VERSIONS:
            if match := pattern.search(text):
                self.found.versions.setdefault(name, match.group(1))
        if match := _PERF_NAME.search(text):
            self.op_hint = match.group(1)
