"""What every CSV table of a run directory has in common: typed rows, versions, one writer.

A table is declared once, as a frozen dataclass whose fields are its columns in order,
each with a meaning and a unit (:func:`column`); :class:`Table` names the file it is
written to and the history of its version. The column list, the CSV header, the
writer's checks and docs/schema.md all come from that declaration.

Writing a run's files, every failure (a full disk, a run directory removed or renamed while
the run measures, a file that cannot be replaced) is one line naming the file and the cause
(:class:`~colbench.errors.WriteFailed`, exit 6), not a traceback or a rank blamed for an op
it measured well. What was on disk stays: rows are appended and flushed one by one (the
reader drops a torn last row, and says so); meta.json is replaced whole or not at all.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import importlib
import math
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from colbench import reading
from colbench.errors import UsageError, WriteFailed
from colbench.text import escape
from colbench.text import markdown as markdown_rows


def column(meaning: str, unit: str = "", default: Any = dataclasses.MISSING) -> Any:
    """A row field that is a CSV column: what it means and its unit, for the docs."""
    return dataclasses.field(default=default, metadata={"meaning": meaning, "unit": unit})


class TableRow(Mapping[str, Any]):
    """Base of a table's frozen row dataclass: read-only access by column name too, so
    code that reads cells by name (the console table, tests) needs no second form."""

    def __getitem__(self, name: str) -> Any:
        if name not in _names(type(self)):
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self) -> Iterator[str]:
        return iter(_names(type(self)))

    def __len__(self) -> int:
        return len(_names(type(self)))

    def cells(self, exact: bool = False) -> list[str]:
        """The row as CSV cells, in column order (``exact``: see :func:`format_cell`)."""
        return [format_cell(getattr(self, name), exact) for name in _names(type(self))]


def _fields(row_type: type) -> tuple[dataclasses.Field[Any], ...]:
    # Typed for any class: TableRow itself is no dataclass, its subclasses are.
    return dataclasses.fields(row_type)


def _names(row_type: type) -> tuple[str, ...]:
    return tuple(f.name for f in _fields(row_type))


@dataclass(frozen=True)
class Table:
    """One CSV table of a run directory: its file, its row type and its version.

    ``history`` maps each version to what changed in it (docs/schema.md shows it);
    bump ``version`` on any change of columns or of their meaning.
    """

    file_name: str
    row_type: type[TableRow]
    version: int
    history: Mapping[int, str]
    title: str = ""
    #: The version that added each column after version 1.
    added_in: Mapping[str, int] = dataclasses.field(default_factory=dict)

    @property
    def columns(self) -> dict[str, str]:
        """Column name -> meaning, in file order."""
        return {f.name: f.metadata["meaning"] for f in _fields(self.row_type)}

    @property
    def units(self) -> dict[str, str]:
        return {f.name: f.metadata["unit"] for f in _fields(self.row_type)}

    @property
    def text_columns(self) -> tuple[str, ...]:
        """Columns read back as text; the rest are numbers."""
        return tuple(f.name for f in _fields(self.row_type) if f.type in ("str", str))

    @property
    def float_columns(self) -> tuple[str, ...]:
        """Columns read back as floating point: those declared float, whatever is added
        later; the other numbers are integers."""
        return tuple(f.name for f in _fields(self.row_type) if "float" in str(f.type))


#: Every table a run directory may hold, in docs/schema.md's order. The module that
#: declares a table adds it (:func:`register`), so that naming them needs none of those
#: modules (colbench.results.rundir would otherwise import p2p). It holds the tables of the
#: modules imported so far; :func:`every_table` imports them all.
TABLES: list[Table] = []
#: The modules that declare a run directory's tables, in docs/schema.md's order.
TABLE_MODULES = (
    "colbench.results.rows",
    "colbench.results.reporters.stragglers",
    "colbench.results.init_rows",
    "colbench.commands.p2p.results",
)


def register(table: Table) -> None:
    """Add ``table`` to :data:`TABLES`, in its module's place."""
    module = table.row_type.__module__
    if module not in TABLE_MODULES:
        raise ValueError(
            f"{table.file_name}: add {module} to colbench.results.tables.TABLE_MODULES"
        )
    # A module imported again (importlib.reload) declares its table anew.
    TABLES[:] = [t for t in TABLES if t.file_name != table.file_name] + [table]
    TABLES.sort(key=lambda t: TABLE_MODULES.index(t.row_type.__module__))


def every_table() -> list[Table]:
    """Every table a run directory may hold, in docs/schema.md's order."""
    for module in TABLE_MODULES:
        importlib.import_module(module)
    return list(TABLES)


def format_cell(value: Any, exact: bool = False) -> str:
    """A value as its CSV cell: empty for a missing number, %.6g for a float; ``exact``:
    in full (repr) where %.6g would not read back as the same number, for values read
    from another tool's file (an nccl-tests report's 23418.697560) that must stay as
    written."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        short = f"{value:.6g}"
        if abs(value) >= 1e15 or (exact and float(short) != value):
            return repr(value)
        return short
    return str(value)


class TableWriter:
    """Appends rows to one table's CSV; each row is flushed at once so a crash keeps it.

    Appending to a file of another schema is refused: its header would not describe the
    new rows, and a reader would read them shifted.
    """

    def __init__(self, path: Path, table: Table, exact: bool = False) -> None:
        self.path = path
        self.table = table
        #: Floats in full where %.6g would change them (:func:`format_cell`).
        self.exact = exact
        self._columns = list(table.columns)
        with checked(path):
            new = not path.exists() or path.stat().st_size == 0
            if not new:
                self._check_header()
            self._file: IO[str] = open(path, "a", newline="", encoding="utf-8")  # noqa: SIM115
            self._writer = csv.writer(self._file)
            if new:
                self._writer.writerow(self._columns)
        if new:
            self._flush()

    def write(self, row: Mapping[str, Any]) -> None:
        """Append one row: a row of the table's type, or a mapping of its columns
        (columns it lacks are written empty)."""
        if isinstance(row, self.table.row_type):
            cells = row.cells(self.exact)
        else:
            unknown = set(row) - set(self._columns)
            if unknown:
                raise ValueError(f"row has columns outside the schema: {sorted(unknown)}")
            cells = [format_cell(row.get(c), self.exact) for c in self._columns]
        with checked(self.path):
            self._writer.writerow(cells)
        self._flush()

    def write_all(self, rows: Iterable[TableRow]) -> None:
        """Append rows made at once (a gathered matrix): one flush for all, not one each."""
        with checked(self.path):
            for row in rows:
                self._writer.writerow(row.cells(self.exact))
        self._flush()

    def _flush(self) -> None:
        with checked(self.path):
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        # A close that cannot flush (the disk filled after the last row) loses only
        # what the failed write already said it lost.
        with contextlib.suppress(OSError):
            self._file.close()

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_header(self) -> None:
        with open(self.path, newline="", encoding="utf-8", errors="replace") as f:
            header = next(csv.reader(f), [])
        if header != self._columns:
            raise UsageError(
                f"{self.path} holds rows of another schema than version {self.table.version}: "
                "appending would mix layouts; write to a new file"
            )


def read_cells(file: Path, what: str) -> tuple[list[str], list[list[str]]]:
    """A table file's header and rows of text cells, through the bounded reader.

    Every row :class:`TableWriter` writes ends in a newline, so a file that does not
    end in one was cut while written (a killed run, a copy stopped short) or edited:
    its last row is dropped when it lacks cells, and said so either way. A row with
    too few cells elsewhere, or too many anywhere, makes the file unreadable.
    """
    text = reading.read_text(file, reading.TABLE)
    try:
        lines = [row for row in csv.reader(text.splitlines(keepends=True)) if row]
    except csv.Error as exc:
        raise UsageError(f"{file} is not a {what}: {exc}") from None
    if not lines:
        raise UsageError(f"{file} is empty: not a {what}")
    header, rows = lines[0], lines[1:]
    if len(set(header)) != len(header):
        raise UsageError(f"{file} is not a {what}: its header repeats a column name")
    if rows and not text.endswith(("\n", "\r")):
        if len(rows[-1]) < len(header):
            rows.pop()
            reading.warn(
                f"{file}: its last row is cut short (a run killed while writing, or a "
                f"copy stopped early); read without it: {len(rows)} row(s)"
            )
        else:
            reading.warn(f"{file} does not end with a newline: its last row may be cut short")
    for number, row in enumerate(rows, start=1):
        if len(row) != len(header):
            raise UsageError(
                f"{file} row {number} has {len(row)} cells, its header {len(header)}: "
                f"not a {what}, or edited by hand"
            )
    return header, rows


def markdown(tables: list[Table]) -> str:
    """docs/schema.md: every table's columns with unit and meaning, and its history."""
    out = [
        "# Result files",
        "",
        "Generated by `python -m colbench.results.tables --markdown` from the row types of",
        "`colbench.results.rundir.TABLES`; `tests/unit/test_schema_doc.py` fails when it is stale.",
        "",
        "Sizes are in bytes with binary prefixes on the command line (1K = 1024 B);",
        "bandwidths are in GB/s, base 10 (1 GB/s = 1e9 B/s); times in microseconds (us).",
    ]
    for table in tables:
        out += ["", f"## {table.file_name}", ""]
        if table.title:
            out += [table.title, ""]
        out += [f"Schema version {table.version}.", ""]
        rows = [
            (f"`{name}`", table.units[name] or "-", table.added_in.get(name, 1), escape(meaning))
            for name, meaning in table.columns.items()
        ]
        out += markdown_rows(["column", "unit", "since", "meaning"], rows)
        out += ["", f"### {table.file_name} schema versions", ""]
        out += [f"- **{v}**: {text}" for v, text in sorted(table.history.items())]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    """``python -m colbench.results.tables --markdown``: print docs/schema.md."""
    if argv != ["--markdown"]:
        print("usage: python -m colbench.results.tables --markdown", file=sys.stderr)
        return 2
    sys.stdout.write(markdown(every_table()))
    return 0


if __name__ == "__main__":
    # Run as a script this file is __main__, not the colbench.results.tables the table modules
    # register with.
    from colbench.results.tables import main as registered_main

    raise SystemExit(registered_main(sys.argv[1:]))


def failure(path: Path | str, exc: OSError) -> WriteFailed:
    """The one line for ``exc`` raised while writing ``path``."""
    cause = exc.strerror or type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        cause += " (its directory was removed or renamed?)"
    return WriteFailed(f"cannot write {path}: {cause}", str(path))


@contextlib.contextmanager
def checked(path: Path | str) -> Iterator[None]:
    """Turn an OSError inside the block into :class:`WriteFailed` naming ``path``."""
    try:
        yield
    except WriteFailed:
        raise
    except OSError as exc:
        raise failure(path, exc) from None


def replace_text(path: Path, text: str) -> None:
    """Write ``path`` whole through a hidden temporary file beside it: a reader sees the
    old file or the new one, never half; a failed write leaves no temporary behind."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise failure(path, exc) from None


def write_text(path: Path | str, text: str, append: bool = False) -> None:
    """Write (or append) ``text`` to ``path``: a report, a list, a figure's companion."""
    with checked(path), open(path, "a" if append else "w", encoding="utf-8") as f:
        f.write(text)
