"""nccl-tests (and rccl-tests) stdout -> colbench rows, so their runs plot and compare like ours.

What real logs look like, and what this reader accepts:

- the table: ``size count type [redop] [root]`` then, per placement (out-of-place, then
  in-place), ``time algbw busbw`` and ``#wrong`` (nccl-tests 2.x, a count or N/A) or
  ``error`` (older releases: the largest absolute error, not a count);
- ``# Using devices`` followed by one ``Rank`` line per GPU: the world size and hosts;
- noise: ``NCCL INFO`` lines anywhere (even inside the header), mpirun ``--tag-output``
  prefixes (``[1,0]<stdout>:``) and ``srun --label`` prefixes (``0: ``), shell trace,
  launcher warnings, version blocks.

The work is done in three steps: :mod:`.nccl_scan` finds the tables,
:mod:`.nccl_infer` tells what each measured (op, world size, types) and
:mod:`.nccl_table` turns each into Rows, checking the log's bandwidths against
colbench's formulas.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench import reading
from colbench.commands.references import place as references
from colbench.errors import UsageError
from colbench.importers import nccl_tests_json
from colbench.importers.nccl_scan import scan
from colbench.importers.nccl_table import Findings, ImportOptions, table_rows
from colbench.results.rows import SCHEMA_VERSION, Row
from colbench.results.rundir import RunDir
from colbench.results.tables import write_text

__all__ = ["Imported", "import_log", "parse_log"]

_VARIANT = re.compile(r"^[A-Za-z_]\w*=[^,=\s]+(?:,[A-Za-z_]\w*=[^,=\s]+)*$")


@dataclass
class Imported:
    """The rows of one log and what was learnt and doubted while reading it."""

    rows: list[Row]
    warnings: list[str]
    notes: list[str]
    facts: dict[str, Any]


def parse_log(
    text: str,
    *,
    source: str = "log",
    world_size: int | None = None,
    op: str | None = None,
    variant: str = "",
    run_id: str = "imported",
) -> Imported:
    """Read nccl-tests stdout, or its JSON report (``-J``: colbench.importers.nccl_tests_json),
    into colbench rows (raises UsageError on what it cannot read)."""
    if world_size is not None and world_size < 1:
        raise UsageError(f"--world-size must be at least 1, got {world_size}")
    if variant and not _VARIANT.match(variant):
        raise UsageError(
            f"bad --variant {variant!r}: use KEY=VALUE pairs joined by commas, e.g. NCCL_ALGO=Tree"
        )
    options = ImportOptions(source, world_size, op, variant, run_id)
    if nccl_tests_json.is_report(text):
        measured, report, notes = nccl_tests_json.parse_report(text, options)
        if not measured:
            raise UsageError(f"{source}: the report holds no measured result")
        facts = {**nccl_tests_json.facts(report, measured), "nccl_tests": report}
        return Imported(measured, [], notes, facts)
    found = scan(text, source)
    tables = [t for t in found.tables if t.lines]
    if not tables:
        raise UsageError(f"{source}: no nccl-tests result table found")
    findings = Findings(warnings=found.warnings)
    rows: list[Row] = []
    for table in tables:
        rows += table_rows(table, options, findings)
    facts = {"versions": found.versions, "tables": findings.tables}
    return Imported(rows, findings.warnings, findings.notes, facts)


def import_log(
    path: str | Path,
    *,
    out_dir: str | Path | None = None,
    results_root: str | Path = "results",
    world_size: int | None = None,
    op: str | None = None,
    variant: str = "",
) -> tuple[Path, Imported]:
    """``colbench import nccl-tests``: write results.csv and meta.json for one log."""
    piped = str(path) == "-"
    source = Path("stdin" if piped else path)
    if not piped and not source.exists():
        raise UsageError(f"cannot read {source}: no such file")
    data = reading.read_stdin(reading.LOG) if piped else reading.read_bytes(source, reading.LOG)
    if reading.is_binary(data):
        raise UsageError(f"{source} holds binary data (NUL bytes), not {reading.LOG.one}")
    default = Path(results_root) / f"imported-{source.stem}"
    target = Path(out_dir) if out_dir is not None else default
    # Parse before creating anything, so a bad log leaves no directory behind.
    text = data.decode("utf-8", errors="replace")
    imported = parse_log(
        text, source=source.name, world_size=world_size, op=op, variant=variant, run_id=target.name
    )
    run_dir = RunDir.create(out_dir, target)
    if run_dir.name != target.name:
        imported.rows = [dataclasses.replace(r, run_id=run_dir.name) for r in imported.rows]
    meta = _meta(run_dir, "-" if piped else str(source.resolve()), data, imported, variant)
    report = "nccl_tests" in imported.facts
    if report:
        # The report itself too: its per-process times and environment are in no row.
        write_text(run_dir.path / nccl_tests_json.COPY_NAME, data.decode("utf-8"))
        meta["source"].update(format="nccl-tests JSON", copy=nccl_tests_json.COPY_NAME)
        meta["nccl_tests"] = imported.facts["nccl_tests"]
    # A report's values are kept as written (a log's have no more digits than %.6g).
    placement = write_run(run_dir, imported.rows, meta, imported.rows, exact=report)
    imported.facts[references.FIELD] = placement
    return run_dir.path, imported


def write_run(
    run_dir: RunDir, rows: list[Row], meta: dict[str, Any], placed: list[Row], exact: bool = False
) -> dict[str, Any]:
    """An import's results.csv and meta.json, ``placed`` set beside the published results
    for this hardware in meta.json (issue 38); that placement."""
    with run_dir.writer(exact=exact) as writer:
        for row in rows:
            writer.write(row)
    meta[references.FIELD] = references.place_rows(placed, meta)
    run_dir.write_meta(meta)
    return meta[references.FIELD]


def _meta(
    run_dir: RunDir, source: str, data: bytes, imported: Imported, variant: str
) -> dict[str, Any]:
    """meta.json of an imported run: where it came from and what was read from it."""
    tables = imported.facts["tables"]
    worlds = sorted({t["world_size"] for t in tables})
    hosts = sorted({h for t in tables for h in t["hosts"]})
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_dir.name,
        "status": "imported",
        "source": {
            "format": "nccl-tests",
            "file": source,
            "sha256": hashlib.sha256(data).hexdigest(),
        },
        "imported_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command_line": list(sys.argv),
        "backend": "nccl",
        "world_size": worlds[0] if len(worlds) == 1 else worlds,
        "hosts": hosts,
        "nnodes": len(hosts) if hosts else None,
        "devices": sorted({d for t in tables for d in t["devices"]}),
        "variant": variant,
        "versions": imported.facts["versions"],
        "tables": tables,
        "rows": len(imported.rows),
        "wrong_total": sum(int(r.wrong or 0) for r in imported.rows),
        "warnings": imported.warnings,
        "notes": imported.notes,
    }
