"""The result schema: fixed CSV columns, a schema version, and the reader.

History of SCHEMA_VERSION (bump on any change of columns or their meaning):
  1 - first release.
  2 - `status` column: ok, or why a row has no measurement (oom); process subgroups
      (--group-size): group_size and groups after nnodes, aggbw_gbps after busbw_gbps;
      algbw/busbw use the group size as n.
      `repeat` column (last): sample index 0..R-1 of `sweep --repeat R`, 0 without it.
      (Version 2 grew while in development: some of its files lack `repeat`, some the
      subgroup columns.)
  3 - `enqueue_us` and `host_bound` (last): the host's time per call to enqueue the
      timed batch beside the GPU time, and whether the GPU waited on the host; status
      `unsupported` (the backend cannot run the op under the run's variant).

load() reads every version: columns a file's version lacks get the value a row of that
version meant by their absence (see _FILL), so every reader sees this version's columns.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable, Mapping
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
    "status": "ok; oom when the buffers could not be allocated, unsupported when the backend "
    "cannot run the op under the variant (e.g. NCCL_ALGO=Tree for all_gather): no measurement",
    "repeat": "sample index 0..R-1 of sweep --repeat R (each repeat re-measures the plan)",
    "enqueue_us": "host time per call to enqueue the timed batch (torch's launch cost), in "
    "microseconds; empty where the call blocks the host until done (gloo on CPU)",
    "host_bound": "1 when the GPU waited on the host (enqueue_us >= 0.9 * time_us): time_us "
    "then measures torch's launch cost, not the network (--cuda-graph shows the latency); "
    "0 when not; empty when not measured",
}

#: What makes two rows the same measurement: rows of two runs are compared only where
#: these are equal (colbench.analysis joins on them). ``requested_bytes`` is left out on
#: purpose: ``size_bytes`` follows from it at a given world size.
KEY_COLUMNS = (
    "variant",
    "backend",
    "world_size",
    "op",
    "dtype",
    "redop",
    "root",
    "in_place",
    "size_bytes",
    "group_size",
    "groups",
)

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

#: A row is host-bound when enqueuing a call took at least this share of the call's time:
#: the GPU then finished each call about as fast as the host could queue the next one,
#: so it idled between calls and time_us is the host's launch cost.
HOST_BOUND_RATIO = 0.9


def host_bound(enqueue_us: float | None, time_us: float | None) -> int | None:
    """The ``host_bound`` cell: 1 when enqueue_us >= HOST_BOUND_RATIO * time_us, else 0;
    None when either time is missing (not measured, or no measurement)."""
    if enqueue_us is None or time_us is None:
        return None
    if math.isnan(enqueue_us) or math.isnan(time_us):
        return None
    return int(enqueue_us >= HOST_BOUND_RATIO * time_us)


def _format(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return f"{value:.6g}" if abs(value) < 1e15 else repr(value)
    return str(value)


class RowWriter:
    """Appends rows to ``results.csv``; each row is flushed at once so a crash keeps it.

    Appending to a file of another schema is refused: its header would not describe the
    new rows, and a reader would read them shifted.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        new = not path.exists() or path.stat().st_size == 0
        if not new:
            _check_header(path)
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


def _check_header(path: Path) -> None:
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        header = next(csv.reader(f), [])
    if header != list(COLUMNS):
        raise UsageError(
            f"{path} holds rows of another schema than version {SCHEMA_VERSION}: "
            "appending would mix layouts; write to a new file"
        )


def frame_text(frame: Any) -> str:
    """A loaded frame as results.csv text in this version's layout; each row keeps its
    schema_version (what its numbers meant when measured)."""
    import io

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    for record in frame[list(COLUMNS)].itertuples(index=False):
        writer.writerow([_format(_plain(v)) for v in record])
    return out.getvalue()


def _plain(value: Any) -> Any:
    import pandas as pd

    if value is pd.NA:
        return None
    return value.item() if hasattr(value, "item") else value


def csv_path(path: str | os.PathLike[str]) -> Path:
    """A run directory or a CSV file -> the CSV file."""
    p = Path(path)
    return p / "results.csv" if p.is_dir() else p


#: The version that added each column after version 1.
_ADDED_IN: dict[str, int] = {
    "group_size": 2,
    "groups": 2,
    "aggbw_gbps": 2,
    "status": 2,
    "repeat": 2,
    "enqueue_us": 3,
    "host_bound": 3,
}
#: Columns that some files of a version lack although the version has them: version 2
#: grew while in development (the subgroup columns and `repeat` came on two branches).
_LATE_IN: dict[int, tuple[str, ...]] = {2: ("group_size", "groups", "aggbw_gbps", "repeat")}


#: What a row of an older file means in a column its file lacks: a text cell, or one
#: taken from the row's other cells. Before subgroups every collective ran on one group
#: of all ranks, so group_size is world_size and aggbw_gbps is busbw_gbps; before
#: --repeat a row was sample 0; before status every written row was measured; before
#: version 3 the host's enqueue time was not measured.
_FILL: dict[str, Callable[[Any], Any]] = {
    "group_size": lambda raw: raw["world_size"],
    "groups": lambda raw: "1",
    "aggbw_gbps": lambda raw: raw["busbw_gbps"],
    "status": lambda raw: STATUS_OK,
    "repeat": lambda raw: "0",
    "enqueue_us": lambda raw: "",
    "host_bound": lambda raw: "",
}


def may_lack(version: int) -> frozenset[str]:
    """This version's columns that a file of ``version`` may lack (load() fills them)."""
    later = {c for c, added in _ADDED_IN.items() if added > version}
    return frozenset(later | set(_LATE_IN.get(version, ())))


def _file_version(file: Path, cells: Any) -> int:
    """The newest schema version a file's rows name: its header must serve that one.

    A file may hold rows of several versions (a baseline pooled from runs of two
    colbench versions): every column exists at the newest, and older rows' meanings
    are a subset of it. A file without rows is read as the oldest version.
    """
    versions = set()
    for text in sorted(set(cells)):
        try:
            versions.add(int(text))
        except ValueError:
            raise UsageError(
                f"{file}: schema_version {text!r} is not a version number: "
                "not a colbench results CSV"
            ) from None
    newest = max(versions, default=1)
    if newest > SCHEMA_VERSION:
        raise UsageError(
            f"{file} has schema version {newest}, newer than this colbench reads "
            f"(1 to {SCHEMA_VERSION}): upgrade colbench to read it"
        )
    if min(versions, default=1) < 1:
        raise UsageError(f"{file} has schema version {min(versions)}: no colbench wrote it")
    return newest


def load(path: str | os.PathLike[str]) -> Any:
    """Read a run's rows as a pandas DataFrame with this version's columns.

    Files of every earlier version are read: the columns their version lacks are filled
    (see _FILL); schema_version keeps what each row was written as. A file of a newer
    version is refused. The version and columns are checked on the raw text first, so
    a file of another version is named as such rather than failing on some cell's type.
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
    version = _file_version(file, raw["schema_version"])
    missing = [c for c in COLUMNS if c not in raw.columns]
    unfillable = [c for c in missing if c not in may_lack(version)]
    if unfillable:
        shown = ", ".join(unfillable[:4]) + (", ..." if len(unfillable) > 4 else "")
        raise UsageError(
            f"{file} lacks {len(unfillable)} column(s) of schema version {version} "
            f"({shown}): truncated or edited by hand?"
        )
    raw = raw.copy()
    for column in missing:
        raw[column] = _FILL[column](raw)
    extra = [c for c in raw.columns if c not in COLUMNS]
    return _typed(file, raw[[*COLUMNS, *extra]])


def _typed(file: Path, raw: Any) -> Any:
    """Text columns as strings, the rest as numbers (an empty cell: a missing number)."""
    import pandas as pd

    frame = raw.copy()
    # Text columns keep empty strings (an empty variant means "no variant").
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
