"""The results table: Row, whose fields are results.csv's columns, and its reader.

Row is declared once: COLUMNS, the CSV header, the writer's checks and docs/schema.md
(``python -m colbench.results.tables --markdown``) come from it. SCHEMA_HISTORY says what each
version changed; bump SCHEMA_VERSION on any change of columns or of their meaning.
load() reads every version (:func:`load`).
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench.errors import UsageError
from colbench.host.launchers.gpus import FABRIC_REAL
from colbench.reading import warn
from colbench.results import metafile, validity
from colbench.results.tables import Table, TableRow, format_cell, read_cells, register
from colbench.results.tables import column as _column
from colbench.results.validity import (
    ADDED_IN,
    FILL,
    SCHEMA_HISTORY,
    SCHEMA_VERSION,
    STATUS_INVALID,
    STATUS_OK,
    STATUS_OOM,
    STATUS_UNSUPPORTED,
    file_version,
    may_lack,
)

#: A row is host-bound when enqueuing a call took at least this share of the call's time:
#: the GPU then finished each call about as fast as the host could queue the next one,
#: so it idled between calls and time_us is the host's launch cost.
HOST_BOUND_RATIO = 0.9

#: What makes two rows the same measurement: rows of two runs are compared only where
#: these are equal (colbench.results.join joins on them). ``requested_bytes`` is left out on
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
    "split",
    "splits",
    "engine",
)


# kw_only: fields keep the file's column order, whichever have defaults.
@dataclass(frozen=True, kw_only=True)
class Row(TableRow):
    """One measured (or unmeasurable) op, dtype, size and placement: a line of results.csv.

    Fields are the columns, in file order. None is an empty cell: not measured, or not
    known (an imported nccl-tests log has no subgroups, repeats or enqueue times).
    """

    schema_version: int = _column("version of this column list (see below)", "", SCHEMA_VERSION)
    run_id: str = _column("identifier of the run (the run directory's name)")
    variant: str = _column("environment variant of the run, e.g. NCCL_ALGO=Tree (empty: none)")
    backend: str = _column("torch.distributed backend: gloo or nccl")
    device: str = _column("cpu, or the GPU model")
    world_size: int = _column("ranks in the whole job", "ranks")
    nnodes: int | None = _column(
        "distinct nodes (kernel and network namespace) the ranks ran on", "nodes"
    )
    group_size: int | None = _column(
        "ranks each collective runs on: the n of the bandwidth formulas", "ranks", None
    )
    groups: int | None = _column(
        "groups of group_size ranks running the collective at the same time", "", None
    )
    op: str = _column("collective (see `colbench explain OP`)")
    dtype: str = _column("element type (torch name)")
    redop: str = _column("reduction operator, or none for ops that do not reduce")
    root: int = _column("root rank of rooted ops, -1 otherwise", "rank")
    in_place: int = _column("1 if output and input share a buffer (the in-place form), else 0")
    requested_bytes: int = _column("size asked for on the command line (1K = 1024)", "B")
    size_bytes: int = _column("bytes as nccl-tests reports them for this op (see explain)", "B")
    count: int = _column("elements as nccl-tests reports them for this op", "elements")
    warmup: int | None = _column("untimed calls before the timed batch", "calls")
    iters: int | None = _column("timed calls in the batch", "calls")
    average: str = _column("how per-rank batch times were combined: avg, min, max or rank0")
    time_us: float | None = _column("batch mean time per call, combined across ranks", "us")
    time_min_us: float | None = _column(
        "fastest iteration (each iteration's time is its slowest rank's)", "us", None
    )
    time_p50_us: float | None = _column("median iteration", "us", None)
    time_p99_us: float | None = _column("99th-percentile iteration", "us", None)
    time_max_us: float | None = _column("slowest iteration", "us", None)
    algbw_gbps: float | None = _column("algorithm bandwidth: size_bytes / time_us", "GB/s")
    busbw_gbps: float | None = _column(
        "bus bandwidth of one group: algbw * the op's factor (see explain)", "GB/s"
    )
    aggbw_gbps: float | None = _column(
        "aggregate bus bandwidth of all groups: busbw_gbps * groups", "GB/s", None
    )
    wrong: int | None = _column(
        "wrong elements summed over ranks; empty when not checked", "elements"
    )
    status: str = _column(
        "ok; oom when the buffers could not be allocated, unsupported when the backend "
        "cannot run the op under the variant (e.g. NCCL_ALGO=Tree for all_gather): no "
        "measurement",
        "",
        STATUS_OK,
    )
    repeat: int | None = _column(
        "sample index 0..R-1 of sweep --repeat R (each repeat re-measures the plan)", "", None
    )
    enqueue_us: float | None = _column(
        "host time per call to enqueue the timed batch (torch's launch cost); empty where "
        "the call blocks the host until done (gloo on CPU)",
        "us",
        None,
    )
    host_bound: int | None = _column(
        "1 when the GPU waited on the host (enqueue_us >= 0.9 * time_us): time_us then "
        "measures torch's launch cost, not the network (--cuda-graph shows the latency); "
        "0 when not; empty when not measured",
        "",
        None,
    )
    slowest_rank: int | None = _column(
        "the straggler: the rank that waited least in the barrier before the timed batch, "
        "i.e. arrived last and was waited for (lowest rank on a tie); waits are durations "
        "on each rank's own clock, so hosts' clocks need not agree (docs/semantics.md)",
        "rank",
        None,
    )
    skew_us: float | None = _column(
        "arrival skew: longest barrier wait minus shortest, how long the first rank to "
        "arrive waited for the straggler",
        "us",
        None,
    )
    time_ranks_avg_us: float | None = _column(
        "mean over ranks of each rank's batch mean (what -a avg reports)", "us", None
    )
    time_ranks_max_us: float | None = _column(
        "slowest rank's batch mean (what -a max reports)", "us", None
    )
    fabric: str = _column(
        "real (one GPU per rank, or CPU ranks), or emulated: ranks sharing a GPU "
        "(--ranks-per-gpu), each an NCCL node of its own over loopback sockets, kernels "
        "time-sliced; comparisons refuse to mix the two",
        "",
        FABRIC_REAL,
    )
    ranks_per_gpu: int = _column("ranks sharing each GPU (--ranks-per-gpu)", "ranks", 1)
    nccl_algo: str = _column(
        "the algorithm NCCL's log says it chose for this call, as NCCL names it (Ring, Tree, "
        "PAT, NVLS...); "
        "empty where not recorded (gloo, a world of one, ops NCCL runs as point-to-point)",
        "",
        "",
    )
    nccl_proto: str = _column(
        "the protocol NCCL's log says it chose (LL, LL128, Simple); empty where not recorded",
        "",
        "",
    )
    ceiling_gbps: float | None = _column(
        "the rate of the link that bounds the row's busbw, one direction, per rank "
        "(docs/explain.md); empty where no rate can be known (meta.json's ceiling says why)",
        "GB/s",
        None,
    )
    pct_of_ceiling: float | None = _column(
        "busbw_gbps as a percentage of ceiling_gbps; above 100 where NVLS or CollNet reduce "
        "in the network",
        "%",
        None,
    )
    split: str = _column(
        "how the world was split into groups: div:K (contiguous groups of K ranks, "
        "--group-size K), mod:K (K groups, each of the ranks with equal rank mod K: one rail "
        "per group); empty for one group of all ranks",
        "",
        "",
    )
    splits: str = _column(
        "all_to_allv's traffic pattern (--splits; a matrix file as file:NAME@SHA256-PREFIX); "
        "empty for other ops",
        "",
        "",
    )
    mean_bytes: float | None = _column(
        "all_to_allv: bytes the mean rank sends (and receives), the exchange's total over n; "
        "size_bytes is the busiest rank's",
        "B",
        None,
    )
    meanbw_gbps: float | None = _column(
        "all_to_allv: mean_bytes / time_us, the bandwidth the mean rank saw", "GB/s", None
    )
    send_imbalance: float | None = _column(
        "all_to_allv: the most bytes one rank sends over the mean (1: balanced)", "", None
    )
    recv_imbalance: float | None = _column(
        "all_to_allv: the most bytes one rank receives over the mean (1: balanced)", "", None
    )
    load: str = _column(
        "what ran beside the collective (--contend, docs/contend.md): gemm:N:DTYPE or "
        "OP:SIZE:DTYPE; empty: nothing (the contend=none variant, or no --contend)",
        "",
        "",
    )
    load_alone_tflops: float | None = _column(
        "a GEMM load's rate without the collective, mean rank", "TFLOP/s", None
    )
    load_beside_tflops: float | None = _column(
        "a GEMM load's rate while the collective's warm-up and timed batch ran, mean rank",
        "TFLOP/s",
        None,
    )
    load_alone_busbw_gbps: float | None = _column(
        "a collective load's busbw without the measured collective", "GB/s", None
    )
    load_beside_busbw_gbps: float | None = _column(
        "a collective load's busbw while the measured collective ran", "GB/s", None
    )
    engine: str = _column(
        "what made the calls (--engine): torch (torch.distributed) or nccl (NCCL itself, "
        "through nccl4py, as nccl-tests, whose imported rows say nccl); both engines' rows "
        "of one size give torch's cost per call",
        "",
        "torch",
    )

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Row:
        """A Row from a loaded frame's record (pandas' missing values become None)."""
        return cls(**{name: plain(record[name]) for name in COLUMNS})


RESULTS = Table(
    "results.csv",
    Row,
    SCHEMA_VERSION,
    SCHEMA_HISTORY,
    "One row per op, dtype, reduction, size and placement measured (per repeat).",
    ADDED_IN,
)
register(RESULTS)

#: Column name -> meaning. The CSV always has exactly these columns, in this order.
COLUMNS: dict[str, str] = RESULTS.columns
#: Columns read back as floating point (every time and bandwidth, the imbalance ratios).
FLOAT_COLUMNS = RESULTS.float_columns
#: The time columns bench's combine_times produces, in schema order.
TIME_COLUMNS = ("time_us", "time_min_us", "time_p50_us", "time_p99_us", "time_max_us")
#: What a row that a measurement made holds (colbench.results.validity); root is -1 for ops
#: without one, so it is not among the numbers that are never negative.
_VALID = validity.Rules(
    statuses=frozenset({STATUS_OK, STATUS_OOM, STATUS_UNSUPPORTED, STATUS_INVALID}),
    non_negative=(
        *FLOAT_COLUMNS,
        *("requested_bytes", "size_bytes", "count", "wrong", "warmup", "iters", "repeat"),
        *("group_size", "groups"),
    ),
    key=KEY_COLUMNS,
)


def frame_text(frame: Any) -> str:
    """A loaded frame as results.csv text in this version's layout; each row keeps its
    schema_version (what its numbers meant when measured)."""
    import io

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    for record in frame[list(COLUMNS)].itertuples(index=False):
        writer.writerow([format_cell(plain(v)) for v in record])
    return out.getvalue()


def plain(value: Any) -> Any:
    """pandas scalars -> plain Python (None for a missing value), so keys hash alike."""
    import pandas as pd

    if value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def csv_path(path: str | os.PathLike[str]) -> Path:
    """A run directory or a CSV file -> the CSV file."""
    p = Path(path)
    return p / RESULTS.file_name if p.is_dir() else p


def load(path: str | os.PathLike[str]) -> Any:
    """Read a run's rows as a pandas DataFrame with this version's columns.

    Files of every earlier version are read: the columns their version lacks are filled
    (see validity.FILL); schema_version keeps what each row was written as. A file of a newer
    version is refused. The version and columns are checked on the raw text first, so
    a file of another version is named as such rather than failing on some cell's type.
    """
    import pandas as pd

    file = csv_path(path)
    if not file.exists():
        raise UsageError(f"no results file at {file}")
    header, cells = read_cells(file, "colbench results CSV")
    raw = pd.DataFrame(cells, columns=header, dtype=str)
    if "schema_version" not in raw.columns:
        raise UsageError(f"{file} has no schema_version column: not a colbench results CSV")
    version = file_version(file, raw["schema_version"])
    missing = [c for c in COLUMNS if c not in raw.columns]
    unfillable = [c for c in missing if c not in may_lack(version)]
    if unfillable:
        shown = ", ".join(unfillable[:4]) + (", ..." if len(unfillable) > 4 else "")
        raise UsageError(
            f"{file} lacks {len(unfillable)} column(s) of schema version {version} "
            f"({shown}): truncated or edited by hand?"
        )
    for column in missing:
        raw[column] = FILL[column](raw)
    extra = [c for c in raw.columns if c not in COLUMNS and c != validity.REASON_COLUMN]
    meta = _meta_beside(file)
    _check_count(file, raw["run_id"], meta)
    frame, non_finite = validity.typed(file, raw[[*COLUMNS, *extra]], RESULTS)
    world = meta.get("world_size") if meta else None
    run_world = (str(meta["run_id"]), world) if isinstance(world, int) and meta else None
    frame, invalid = validity.mark(frame, non_finite, _VALID, run_world, "repeat" not in missing)
    if invalid:
        warn(f"{file}: {validity.summary(invalid)}")
    return frame


def _meta_beside(file: Path) -> dict[str, Any] | None:
    """The run's meta.json when ``file`` is a run directory's results.csv."""
    if file.name != RESULTS.file_name:
        return None
    return metafile.read_or_none(file.parent / metafile.META_FILE, SCHEMA_VERSION)


def _check_count(file: Path, run_ids: Any, meta: dict[str, Any] | None) -> None:
    """Say when the file holds fewer of its run's rows than its run planned or wrote (a
    run killed or failed part way, a copy cut at a row's end, rows deleted), or its run
    never finished: what is left must not read as a whole run."""
    if not meta or not meta.get("run_id"):
        return
    held = int((run_ids == str(meta["run_id"])).sum())
    why = metafile.incomplete(meta, held)
    if why:
        warn(f"{file}: run {meta['run_id']} is incomplete: {why}")
