"""``colbench references``: the table listed and filtered, a fleet's own file read, a
finished run placed against either, a selection written as a references file."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from colbench import text
from colbench.commands.references import place as placing
from colbench.commands.references.table import Reference, dump, load, select
from colbench.config.sizes import format_size
from colbench.errors import ExitCode, UsageError
from colbench.output import plural
from colbench.text import Column


@dataclass(frozen=True)
class Filters:
    """What ``colbench references`` keeps: every filter given must match."""

    gpu: str | None = None
    gpus_per_node: int | None = None
    nodes: int | None = None
    op: str | None = None
    kind: str | None = None


def table_text(refs: Sequence[Reference]) -> str:
    """One line per entry: what, on which hardware, how fast, from where and when."""
    header = ("id", "kind", "hardware", "op", "size", "busbw GB/s", "date", "source")
    rows = []
    for r in refs:
        hardware = r.hardware_label() + (f", {r.algorithm}" if r.algorithm else "")
        size = format_size(r.size_bytes) if r.size_bytes else "peak"
        rows.append((r.id, r.kind, hardware, r.op, size, f"{r.busbw_gbps:g}", r.date, r.cite()))
    columns = text.fit([Column(h, align="<", gap="  ") for h in header], rows)
    return "\n".join(text.line(line, columns, lead="") for line in (header, *rows))


def run(
    filters: Filters,
    references: str | None = None,
    extra: Sequence[Reference] = (),
    run_dir: str | None = None,
    write: str | None = None,
    as_json: bool = False,
) -> int:
    """List (or write, or place a run against) the entries that match ``filters``; the
    shipped table, or ``references``, with ``extra`` entries added (health's floors)."""
    # Health's floors given alone are listed (or written) alone: a fleet's own file.
    base = load(references) if references or not extra else []
    refs = [*base, *extra]
    chosen = select(refs, **vars(filters))
    if run_dir is not None:
        path = Path(run_dir)
        if not (path / "results.csv").is_file():
            raise UsageError(f"--run {run_dir}: no results.csv there (a sweep's or an import's)")
        from colbench.results.rundir import RunDir

        files = RunDir(path)
        placement = placing.place(
            placing.read_rows(files.table_path()),
            files.read_meta(),
            chosen,
            references or "published",
        )
        files.update_meta(**{placing.FIELD: placement})
        for line in placing.lines(placement):
            print(line)
    elif write is not None:
        from colbench.results import tables

        tables.write_text(write, json.dumps(dump(chosen), indent=1) + "\n")
        print(f"colbench: {len(chosen)} entries in {write}", file=sys.stderr)
    elif as_json:
        print(json.dumps(dump(chosen), indent=1))
    elif not chosen:
        print("colbench: no entry matches these filters", file=sys.stderr)
    else:
        print(table_text(chosen))
        sources = {r.cite() for r in chosen}
        said = f"{plural(len(chosen), 'entry', 'entries')} from {plural(len(sources), 'source')}"
        print(f"\n{said}", file=sys.stderr)
    return int(ExitCode.OK)
