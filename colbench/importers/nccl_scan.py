"""Finding nccl-tests' tables in a log, before anything is interpreted.

A log is read line by line: launcher prefixes are stripped, ``NCCL INFO`` noise is
skipped, ``#`` lines set the context (rank lines, the -b/-e/-f header, the *_perf
name, versions) and each table collects the data lines under its header, with the clues
to its world size a log without ``# Using devices`` rank lines still holds
(:class:`WorldEvidence`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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


_NRANKS = re.compile(r"\bcomm 0x[0-9a-f]+ rank \d+ nranks (\d+)", re.IGNORECASE)
_THREADS_GPUS = re.compile(r"\bnThread\s+(\d+)\s+nGpus\s+(\d+)")
_PERF_BINARY = re.compile(r"(?:^|/)[a-z][a-z0-9_]*_perf(?:_mpi)?$")
_LAUNCHERS = ("mpirun", "mpiexec", "orterun", "prterun", "srun", "aprun", "jsrun", "flux")
#: Launcher options that give the number of processes.
_PROCESS_FLAGS = ("-np", "-n", "--np", "--n", "--ntasks")
_FLAG_VALUE = re.compile(r"^(-[-\w]+)=(\d+)$")


@dataclass
class WorldEvidence:
    """What one run's part of a log says about its world size, when it lacks rank lines.

    A trimmed log can still say how many ranks ran, in three places:

    - NCCL's own ``comm 0x... rank R nranks N`` lines (printed with ``NCCL_DEBUG=INFO``);
    - nccl-tests' ``# nThread T nGpus G`` header (or ``-t``/``-g`` on its command line): each
      process drives T x G ranks, so the world is T x G x processes;
    - the command line: ``mpirun -np P`` gives the processes, and a ``*_perf`` binary run
      bare in a log that names no launcher anywhere is one process.

    Only a single, consistent answer is taken; otherwise the error says where to look.
    """

    nranks: set[int] = field(default_factory=set)
    header: tuple[int, int] | None = None
    #: (threads, gpus, processes) from the ``*_perf`` command line; None where not given.
    command: tuple[int | None, int | None, int | None] | None = None
    launcher_named: bool = False

    def observe(self, line: str) -> None:
        """Take what one log line (prefix already stripped) says."""
        if match := _NRANKS.search(line):
            self.nranks.add(int(match.group(1)))
            return
        if match := _THREADS_GPUS.search(line):
            self.header = (int(match.group(1)), int(match.group(2)))
        tokens = line.split()
        if line.startswith("#"):
            # nccl-tests' own comments name the binary ("Collective test starting: x_perf")
            # but are no command line.
            return
        if any(t.rsplit("/", 1)[-1] in _LAUNCHERS for t in tokens):
            self.launcher_named = True
        for index, token in enumerate(tokens):
            options_follow = any(t.startswith("-") for t in tokens[index + 1 :])
            if _PERF_BINARY.search(token) and options_follow:
                self.command = _command(tokens[:index], tokens[index + 1 :])
                return

    def infer(self) -> tuple[int, str] | None:
        """(world size, where the log says it), when the log says it one way only."""
        answers = {n: f"NCCL INFO 'nranks {n}' lines" for n in self.nranks}
        product = self._product()
        if product is not None:
            answers.setdefault(product[0], product[1])
        if len(answers) != 1:
            return None
        return next(iter(answers.items()))

    def where_to_look(self) -> str:
        """What the log says and lacks, for the error that asks for --world-size."""
        if len(self.nranks) > 1:
            values = ", ".join(str(n) for n in sorted(self.nranks))
            return f"its NCCL INFO lines show communicators of {values} ranks"
        product = self._product()
        if self.nranks and product is not None:
            return (
                f"its NCCL INFO lines say nranks {next(iter(self.nranks))} but its "
                f"{product[1]} give {product[0]}"
            )
        threads, gpus = self._threads_gpus()
        if self.header is not None or self.command is not None:
            where = "'# nThread T nGpus G' header" if self.header else "-t/-g options"
            return (
                f"its {where} gives nThread {threads} x nGpus {gpus} ranks per process but "
                "not how many processes ran (mpirun -np P)"
            )
        return (
            "no '# nThread T nGpus G' header with its mpirun command nor NCCL INFO "
            "'nranks N' lines (NCCL_DEBUG=INFO)"
        )

    def _threads_gpus(self) -> tuple[int, int]:
        # The header is what the binary used; the command line only what it was asked.
        if self.header is not None:
            return self.header
        threads, gpus, _ = self.command or (None, None, None)
        return threads or 1, gpus or 1

    def _product(self) -> tuple[int, str] | None:
        # A *_perf binary run bare, in a log that names no launcher, is one process.
        if self.command is None or (self.command[2] is None and self.launcher_named):
            return None
        processes = 1 if self.command[2] is None else self.command[2]
        threads, gpus = self._threads_gpus()
        source = "'# nThread T nGpus G' header" if self.header else "-t/-g options"
        how = "one process" if self.command[2] is None else f"{processes} processes"
        return threads * gpus * processes, f"{source} and command line ({how})"


def _command(before: list[str], after: list[str]) -> tuple[int | None, int | None, int | None]:
    """(threads, gpus, processes) named on a ``*_perf`` command line."""
    options = _options(after)
    launched = any(t.rsplit("/", 1)[-1] in _LAUNCHERS for t in before)
    processes = None
    if launched:
        launcher = _options(before)
        processes = next((launcher[f] for f in _PROCESS_FLAGS if f in launcher), None)
    threads = options.get("-t", options.get("--nthreads"))
    gpus = options.get("-g", options.get("--ngpus"))
    return threads, gpus, processes


def _options(tokens: list[str]) -> dict[str, int]:
    """Integer-valued options, as ``-g 8`` or ``--ntasks=8``."""
    found: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if match := _FLAG_VALUE.match(token):
            found[match.group(1)] = int(match.group(2))
        elif token.startswith("-") and index + 1 < len(tokens) and tokens[index + 1].isdigit():
            found[token] = int(tokens[index + 1])
    return found
