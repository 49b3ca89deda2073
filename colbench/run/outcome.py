"""How a run ends, in meta.json and on the terminal: rows kept, done, failed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from colbench import metadata
from colbench.errors import ExitCode
from colbench.results import SCHEMA_VERSION


def rows_kept(run_dir: Path) -> int:
    try:
        with open(run_dir / "results.csv", encoding="utf-8") as f:
            return max(0, sum(1 for _ in f) - 1)
    except OSError:
        return 0


def tidy_logs(run_dir: Path) -> None:
    """Empty rank logs of a clean run say nothing: remove them."""
    for log in run_dir.glob("rank*.log"):
        if log.stat().st_size == 0:
            log.unlink()


def report_done(run_dir: Path) -> int:
    meta = metadata.read(run_dir)
    wrong = int(meta.get("wrong_total") or 0)
    rows = meta.get("rows", 0)
    print(f"colbench: {rows} rows in {run_dir}/results.csv", file=sys.stderr)
    if wrong:
        print(f"colbench: {wrong} wrong element(s): results are not trustworthy", file=sys.stderr)
        return int(ExitCode.DATA_ERROR)
    if meta.get("rows_oom"):
        print(
            f"colbench: {meta['rows_oom']} row(s) could not allocate their buffers (status oom)",
            file=sys.stderr,
        )
        return int(ExitCode.DATA_ERROR)
    return int(ExitCode.OK)


def finish_meta(run_dir: Path, status: str, fields: dict[str, Any]) -> None:
    try:
        meta = metadata.read(run_dir)
    except (OSError, json.JSONDecodeError):
        meta = {"run_id": run_dir.name, "schema_version": SCHEMA_VERSION}
    meta.update(status=status, **fields)
    metadata.write(run_dir, meta)
