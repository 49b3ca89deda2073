"""The result schema: fixed CSV columns, a schema version, and the reader.

History of SCHEMA_VERSION (bump on any change of columns or their meaning):
  1 - first release.
  2 - `status` column: ok, or why a row has no measurement (oom); process subgroups
      (--group-size): group_size and groups after nnodes, aggbw_gbps after busbw_gbps;
      algbw/busbw use the group size as n.
      `repeat` column (last): sample index 0..R-1 of `sweep --repeat R`, 0 without it.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from colbench.errors import UsageError

SCHEMA_VERSION = 3

#: Column name -> meaning. The CSV always has exactly these columns, in this order.
COLUMNS: dict[str, str] = {
    "schema_version": "version of this column list (see colbench.results)",
    "run_id": "identifier of the run (the run directory's name)",
    "variant": "environment variant of the run, e.g. NCCL_ALGO=Tree (empty: none)",
    "backend": "torch.distributed backend: gloo or nccl",
    "device": "cpu, or the GPU model",
    "world_size": "ranks in the whole job",
    "nnodes": "distinct nodes (kernel and network namespace) the ranks ran on",
    "group_size": "ranks each collective runs on: the n of the bandwidth formulas",
    "groups": "groups of group_size ranks running the collective at the same time",
    "op": "collective (see `colbench explain OP`)",
    "dtype": "element type (torch name)",
    "redop": "reduction operator, or none for ops that do not reduce",
    "root": "root rank of rooted ops, -1 otherwise",
    "in_place": "1 if output and input share a buffer (the in-place form), else 0",
    "requested_bytes": "size asked for on the command line, in bytes (1K = 1024)",
    "size_bytes": "bytes as nccl-tests reports them for this op (see explain)",
    "count": "elements as nccl-tests reports them for this op",
    "warmup": "untimed calls before the timed batch",
    "iters": "timed calls in the batch",
    "average": "how per-rank batch times were combined: avg, min, max or rank0",
    "time_us": "batch mean time per call, combined across ranks, in microseconds",
    "time_min_us": "fastest iteration (each iteration's time is its slowest rank's)",
    "time_p50_us": "median iteration",
    "time_p99_us": "99th-percentile iteration",
    "time_max_us": "slowest iteration",
    "algbw_gbps": "algorithm bandwidth: size_bytes / time_us, in GB/s (1e9 bytes/s)",
    "busbw_gbps": "bus bandwidth of one group: algbw * the op's factor (see explain), in GB/s",
    "aggbw_gbps": "aggregate bus bandwidth of all groups: busbw_gbps * groups, in GB/s",
    "wrong": "wrong elements summed over ranks; empty when not checked",
    "status": "ok, or oom when the buffers could not be allocated (no measurement)",
    "repeat": "sample index 0..R-1 of sweep --repeat R (each repeat re-measures the plan)",
    "enqueue_us": "host time per call to enqueue the timed batch, in microseconds",
    "host_bound": "1 when enqueue_us >= 0.9 * time_us",
}

#: Columns read back as text and as floating point; the rest are integers.
TEXT_COLUMNS = (
    "run_id",
    "variant",
    "backend",
    "device",
    "op",
    "dtype",
    "redop",
    "average",
    "status",
)
#: Every time and bandwidth column is a float, whatever is added later.
FLOAT_COLUMNS = tuple(c for c in COLUMNS if c.endswith(("_us", "_gbps")))

#: Values of the ``status`` column.
STATUS_OK = "ok"
STATUS_OOM = "oom"
STATUS_UNSUPPORTED = "unsupported"
HOST_BOUND_RATIO = 0.9


def host_bound(enqueue_us: float | None, time_us: float | None) -> int | None:
    if enqueue_us is None or time_us is None:
        return None
    return int(enqueue_us >= HOST_BOUND_RATIO * time_us)


def _format(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e15 else repr(value)
    return str(value)


class RowWriter:
    """Appends rows to ``results.csv``; each row is flushed at once so a crash keeps it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        new = not path.exists() or path.stat().st_size == 0
        self._file: IO[str] = open(path, "a", newline="", encoding="utf-8")  # noqa: SIM115
        self._writer = csv.writer(self._file)
        if new:
            self._writer.writerow(COLUMNS)
            self._flush()

    def write(self, row: Mapping[str, Any]) -> None:
        unknown = set(row) - set(COLUMNS)
        if unknown:
            raise ValueError(f"row has columns outside the schema: {sorted(unknown)}")
        self._writer.writerow([_format(row.get(col)) for col in COLUMNS])
        self._flush()

    def _flush(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def csv_path(path: str | os.PathLike[str]) -> Path:
    """A run directory or a CSV file -> the CSV file."""
    p = Path(path)
    return p / "results.csv" if p.is_dir() else p


def load(path: str | os.PathLike[str]) -> Any:
    """Read a run's rows as a pandas DataFrame, refusing files of another schema.

    The schema version and columns are checked on the raw text first, so a file of
    another version is named as such rather than failing on some cell's type.
    """
    import pandas as pd

    file = csv_path(path)
    if not file.is_file():
        raise UsageError(f"no results file at {file}")
    try:
        raw = pd.read_csv(file, dtype=str, keep_default_na=False)
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"{file} is not a colbench results CSV: {str(exc).splitlines()[0]}"
        ) from None
    if "schema_version" not in raw.columns:
        raise UsageError(f"{file} has no schema_version column: not a colbench results CSV")
    versions = sorted(set(raw["schema_version"]))
    if versions and versions != [str(SCHEMA_VERSION)]:
        raise UsageError(
            f"{file} has schema version {', '.join(versions)}; this colbench reads "
            f"version {SCHEMA_VERSION} only"
        )
    missing = [c for c in COLUMNS if c not in raw.columns]
    if missing:
        shown = ", ".join(missing[:4]) + (", ..." if len(missing) > 4 else "")
        raise UsageError(
            f"{file} lacks {len(missing)} column(s) of schema version {SCHEMA_VERSION} "
            f"({shown}): truncated or edited by hand?"
        )
    frame = raw.copy()
    # Text columns keep empty strings (an empty variant means "no variant"); in every
    # other column an empty cell is a missing number.
    for column in COLUMNS:
        if column in TEXT_COLUMNS:
            frame[column] = raw[column].astype("string")
            continue
        try:
            numbers = pd.to_numeric(raw[column].replace("", None))
        except (ValueError, TypeError):
            raise UsageError(
                f"{file}: column {column} holds a value that is not a number"
            ) from None
        if column in FLOAT_COLUMNS:
            frame[column] = numbers.astype("float64")
        elif numbers.isna().any():
            frame[column] = numbers.astype("Int64")
        else:
            frame[column] = numbers.astype("int64")
    return frame
