"""Where results enter (``colbench.results.rows.load``): results.csv's versions (what each
changed, and what a row of an older file means in a column its file lacks, :data:`FILL`), a
table's text cells typed, and the rows no measurement can have found.

Loading a run is most of what gate, compare, fit and predict spend, and typing its cells was
most of a load: each number column parses in one pandas call, each distinct cell once, and
only a column pandas refuses (a blank or nan cell) takes the text pass per cell
(tests/unit/test_typed.py holds that pass for every column and checks both agree).

A time, size or bandwidth that is negative or not finite, a row that repeats the key of an
earlier one, a row of another world size than its run's, a status no colbench writes: a
hand-edited file, a log of a broken run, a copy pasted twice. Such a row is kept, every cell
as read, but its status becomes ``invalid`` and :data:`REASON_COLUMN` says why, so no
verdict (gate, compare, fit, plot, predict) takes it as data: every reader keeps only rows
of status ``ok``. The loader says how many, once. The rules' column groups come from
:mod:`colbench.results.rows`, which passes them in.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from colbench.errors import UsageError
from colbench.host.launchers.gpus import FABRIC_REAL
from colbench.results.metafile import check_version
from colbench.results.tables import Table

#: Values of the ``status`` column: measured, out of memory, not runnable under the run's
#: variant, and (STATUS_INVALID) values no measurement can have: kept, not judged.
STATUS_OK = "ok"
STATUS_OOM = "oom"
STATUS_UNSUPPORTED = "unsupported"
STATUS_INVALID = "invalid"
#: Why a row is invalid: a column of loaded frames that hold an invalid row (empty for
#: every other row), so the frame of a sound file has results.csv's columns alone;
#: results.csv keeps the status, and a reload finds the reason again.
REASON_COLUMN = "invalid_reason"


SCHEMA_VERSION = 9

#: What each version of results.csv changed.
SCHEMA_HISTORY: dict[int, str] = {
    1: "first release.",
    2: "`status` column: ok, or why a row has no measurement (oom); process subgroups "
    "(--group-size): group_size and groups after nnodes, aggbw_gbps after busbw_gbps; algbw "
    "and busbw use the group size as n. `repeat` column (last): sample index 0..R-1 of "
    "`sweep --repeat R`, 0 without it. (Version 2 grew while in development: some of its "
    "files lack `repeat`, some the subgroup columns.) Older files read as status ok, "
    "group_size = world_size, groups 1, aggbw_gbps = busbw_gbps, repeat 0.",
    3: "`enqueue_us` and `host_bound` (last): the host's time per call to enqueue the timed "
    "batch beside the GPU time, and whether the GPU waited on the host; status "
    "`unsupported` (the backend cannot run the op under the run's variant). Older files "
    "read as enqueue_us and host_bound empty (not measured).",
    4: "rank skew (last): `slowest_rank` and `skew_us` from each rank's wait in the barrier "
    "before the timed batch, `time_ranks_avg_us` and `time_ranks_max_us` (what -a avg and "
    "-a max report, whichever -a the run used); a second table, per_rank.csv, with "
    "--per-rank. Older files read as these four empty (not measured).",
    5: "the fabric and what NCCL ran (last): `fabric` (real, or emulated: --ranks-per-gpu "
    "ranks sharing a GPU, each an NCCL node of its own) and `ranks_per_gpu`; `nccl_algo` and "
    "`nccl_proto`, the algorithm and protocol NCCL's own log says it chose for the row's "
    "call (empty where not recorded). Older files read as fabric real, ranks_per_gpu 1, "
    "nccl_algo and nccl_proto empty.",
    6: "the hardware's ceiling (last): `ceiling_gbps`, the rate of the link that bounds the "
    "row (NVLink or PCIe within a node, the NICs per rank across nodes, the interface for "
    "gloo; meta.json's `ceiling` says its source, or why there is none) or --ceiling-gbps, "
    "and `pct_of_ceiling`, busbw as a percentage of it. Older files read as both empty.",
    7: "uneven exchanges and strided groups (last): `split`, how the world was split into "
    "groups (div:K, contiguous groups of K as with --group-size; mod:K, K groups of the "
    "ranks with equal rank mod K; empty for one group); `splits`, all_to_allv's traffic "
    "pattern; `mean_bytes`, `meanbw_gbps`, `send_imbalance` and `recv_imbalance`, what "
    "all_to_allv's size_bytes (its busiest rank's) hides. Both `split` and `splits` are key "
    "columns. Older files read as split div:group_size where groups > 1 (else empty), the "
    "other five empty.",
    8: "collectives under load (last, `sweep --contend`): `load`, what ran beside the "
    "measured collective (gemm:N:DTYPE or OP:SIZE:DTYPE; empty: nothing); the load's own "
    "rate alone and beside the collective, `load_alone_tflops` and `load_beside_tflops` for "
    "a GEMM, `load_alone_busbw_gbps` and `load_beside_busbw_gbps` for a collective. Older "
    "files read as load empty, the rates empty.",
    9: "`engine` (last, `sweep --engine`): what made the calls, torch (torch.distributed) or "
    "nccl (NCCL called directly through nccl4py, as nccl-tests calls it); a key column. "
    "Older files read as engine torch.",
}

#: The --contend columns (version 8).
LOAD_COLUMNS = (
    "load",
    "load_alone_tflops",
    "load_beside_tflops",
    "load_alone_busbw_gbps",
    "load_beside_busbw_gbps",
)

#: The columns each version after version 1 added.
_ADDED: dict[int, tuple[str, ...]] = {
    2: ("group_size", "groups", "aggbw_gbps", "status", "repeat"),
    3: ("enqueue_us", "host_bound"),
    4: ("slowest_rank", "skew_us", "time_ranks_avg_us", "time_ranks_max_us"),
    5: ("fabric", "ranks_per_gpu", "nccl_algo", "nccl_proto"),
    6: ("ceiling_gbps", "pct_of_ceiling"),
    7: ("split", "splits", "mean_bytes", "meanbw_gbps", "send_imbalance", "recv_imbalance"),
    8: LOAD_COLUMNS,
    9: ("engine",),
}
#: The version that added each column after version 1.
ADDED_IN: dict[str, int] = {c: version for version, added in _ADDED.items() for c in added}
#: Columns that some files of a version lack although the version has them: version 2
#: grew while in development (the subgroup columns and `repeat` came on two branches).
LATE_IN: dict[int, tuple[str, ...]] = {2: ("group_size", "groups", "aggbw_gbps", "repeat")}


#: What a row of an older file means in a column its file lacks: a text cell, or one
#: taken from the row's other cells; empty (not measured, not recorded, nothing ran beside
#: the collective) where no other meaning holds. Before subgroups every collective ran on
#: one group of all ranks, so group_size is world_size and aggbw_gbps is busbw_gbps;
#: before --repeat a row was sample 0; before status every written row was measured;
#: before version 5 every rank had a GPU (or a CPU) of its own; before version 7 every
#: split was contiguous; before version 9 every call went through torch.distributed.
FILL: dict[str, Callable[[Any], Any]] = {
    **dict.fromkeys(ADDED_IN, lambda raw: ""),
    "group_size": lambda raw: raw["world_size"],
    "groups": lambda raw: "1",
    "aggbw_gbps": lambda raw: raw["busbw_gbps"],
    "status": lambda raw: STATUS_OK,
    "repeat": lambda raw: "0",
    "fabric": lambda raw: FABRIC_REAL,
    "ranks_per_gpu": lambda raw: "1",
    "split": lambda raw: _contiguous_split(raw),
    "engine": lambda raw: "torch",
}


def _contiguous_split(raw: Any) -> Any:
    """Before version 7 every split was contiguous (--group-size)."""
    several = raw["groups"].astype(str).str.strip().isin(("", "1")) == False  # noqa: E712
    return ("div:" + raw["group_size"].astype(str)).where(several, "")


def may_lack(version: int) -> frozenset[str]:
    """This version's columns that a file of ``version`` may lack (load() fills them)."""
    later = {c for c, added in ADDED_IN.items() if added > version}
    return frozenset(later | set(LATE_IN.get(version, ())))


def file_version(file: Path, cells: Any) -> int:
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
    check_version(file, newest, SCHEMA_VERSION)
    if min(versions, default=1) < 1:
        raise UsageError(f"{file} has schema version {min(versions)}: no colbench wrote it")
    return newest


@dataclass(frozen=True)
class Rules:
    """What a valid row holds, by column group."""

    #: Every status a colbench writes.
    statuses: frozenset[str]
    #: Numbers that are never negative where present: times, sizes, bandwidths, counts.
    non_negative: tuple[str, ...]
    #: What makes two rows of one run the same measurement (with run_id and repeat).
    key: tuple[str, ...]


def mark(
    frame: Any,
    non_finite: Mapping[str, Any],
    rules: Rules,
    run_world_size: tuple[str, int] | None,
    repeats_known: bool = True,
) -> tuple[Any, Counter[str]]:
    """``frame`` with its invalid rows' status set to ``invalid`` and their reason in
    :data:`REASON_COLUMN`; and how many rows each reason (its kind, without the row's
    values) took.

    ``non_finite``: per numeric column, which of its cells held inf or nan as text (an
    empty cell is a value not measured, which is valid). ``run_world_size``: the run_id
    and world size meta.json records for the file's own run. ``repeats_known``: the file
    has a ``repeat`` column; some version-2 files lack it, and their --repeat samples
    share one key, as they were written.
    """
    import numpy as np
    import pandas as pd

    rules_hit = [(_flags(mask), f"{column} is not finite") for column, mask in non_finite.items()]
    rules_hit += [(_below(frame[c], 0), f"{c} is negative") for c in rules.non_negative]
    rules_hit.append((_below(frame["world_size"], 1), "world_size is below 1"))
    known = frame["status"].isin(sorted(rules.statuses))
    rules_hit.append((~_flags(known), "its status is not one colbench writes"))
    if run_world_size is not None:
        run_id, world_size = run_world_size
        other = _flags(frame["run_id"] == run_id) & _flags(frame["world_size"] != world_size)
        rules_hit.append((other, f"its world_size is not its run's ({world_size}, meta.json)"))
    if repeats_known:
        repeated = frame.duplicated(subset=["run_id", *rules.key, "repeat"], keep="first")
        rules_hit.append((_flags(repeated), "it repeats the key of an earlier row"))
    rules_hit.append((_flags(frame["status"] == STATUS_INVALID), "its file marks it invalid"))
    # One pass over a rules x rows table rather than a pandas mask per rule: a row's
    # reason is the first rule it breaks, in the order above.
    hits = np.vstack([flags for flags, _ in rules_hit])
    bad = hits.any(axis=0)
    if not bad.any():
        return frame, Counter()
    texts = np.array([text for _, text in rules_hit], dtype=object)
    first = texts[hits.argmax(axis=0)]
    out = frame.copy()
    out["status"] = out["status"].mask(pd.Series(bad, index=frame.index), STATUS_INVALID)
    out[REASON_COLUMN] = pd.Series(np.where(bad, first, ""), index=frame.index, dtype="string")
    # Counted in row order: the summary lists equal counts in the order rows first had them.
    return out, Counter(str(r) for r in first[bad])


def _flags(mask: Any) -> Any:
    """A boolean Series as a numpy array of bools, a missing value (a comparison with an
    empty cell) as False: an empty cell is a value not measured, which is valid."""
    import numpy as np

    if hasattr(mask, "to_numpy"):
        return mask.to_numpy(dtype=bool, na_value=False)
    return np.asarray(mask, dtype=bool)


def _below(numbers: Any, bound: int) -> Any:
    """Which of a numeric column's values are below ``bound``, in numpy (a pandas
    comparison per column cost more than the rest of the rules): an empty cell is not."""
    import numpy as np

    return numbers.to_numpy(dtype="float64", na_value=np.nan) < bound


def summary(counts: Counter[str]) -> str:
    """'3 row(s) are invalid and not judged (2: time_us is not finite; 1: ...)'."""
    total = sum(counts.values())
    kinds = "; ".join(f"{n}: {why}" for why, n in counts.most_common())
    return f"{total} row(s) are invalid and not judged ({kinds})"


def typed(file: Path, raw: Any, table: Table) -> tuple[Any, dict[str, Any]]:
    """``raw``'s cells (text) of the table's columns typed: text columns as strings, the
    rest as numbers (an empty cell: a missing number); other columns are kept as they are.
    And, per floating-point column, the cells that held inf or nan (validity's input)."""
    text_columns, float_columns = table.text_columns, table.float_columns
    frame = raw.copy()
    non_finite: dict[str, Any] = {}
    for column in table.columns:
        # Text columns keep empty strings (an empty variant means "no variant").
        if column in text_columns:
            frame[column] = raw[column].astype("string")
            continue
        numbers, nan_cells = _numbers(file, column, raw[column], column in float_columns)
        if column in float_columns:
            frame[column] = numbers.astype("float64")
            bad = (frame[column].abs() == math.inf) | nan_cells
            if bad.any():
                non_finite[column] = bad
            continue
        frame[column] = _whole(file, column, numbers)
    return frame, non_finite


def _whole(file: Path, column: str, numbers: Any) -> Any:
    """A count column's numbers as integers: Int64 keeps a missing count missing; int64 is
    what a whole column gives. A fraction, an infinity or a number past int64 is refused:
    casting a column with no missing cell to int64 would cut 1.5 to 1 and wrap 1e30."""
    import numpy as np

    present = numbers.dropna()
    if present.dtype.kind == "f":
        whole = np.isfinite(present) & (present == np.trunc(present))
        fits = bool((whole & (present >= -(2.0**63)) & (present < 2.0**63)).all())
    else:
        fits = present.dtype.kind != "u" or bool((present <= np.iinfo(np.int64).max).all())
    try:
        if not fits:
            raise ValueError(column)
        return numbers.astype("Int64" if numbers.isna().any() else "int64")
    except (ValueError, TypeError, OverflowError):
        raise UsageError(
            f"{file}: column {column} holds a value that is not a whole number"
        ) from None


def _numbers(file: Path, column: str, cells: Any, floats: bool) -> tuple[Any, Any]:
    """A column's cells as numbers, and which held nan (False: none)."""
    import pandas as pd

    # Most columns need no text pass: pandas reads " 12 " and inf, an empty cell as NaN,
    # and refuses blank and nan cells (test_typed.py), so in a column it parses as numbers
    # the pass would have masked only empty cells, which read as the same NaN.
    with contextlib.suppress(ValueError, TypeError, OverflowError):
        numbers = _parsed(cells)
        if numbers.dtype.kind in "iuf":  # not a huge integer: pandas keeps those as text
            return numbers, False
    text = cells.fillna("").astype(str).str.strip()
    # A nan cell is no value, and unlike an empty cell (not measured) no measurement wrote it.
    nan_cells = text.str.lower().isin(("nan", "+nan", "-nan")) & floats
    try:
        return pd.to_numeric(cells.mask((text == "") | nan_cells, None)), nan_cells
    except (ValueError, TypeError):
        raise UsageError(f"{file}: column {column} holds a value that is not a number") from None


def _parsed(cells: Any) -> Any:
    """``pd.to_numeric(cells)``, parsing each distinct cell once where cells repeat (sizes,
    counts, flags): the number type it picks follows from which cells it saw, not how often."""
    import pandas as pd

    codes, distinct = pd.factorize(cells.to_numpy(dtype=object), use_na_sentinel=False)
    if len(distinct) * 4 > len(codes):  # times and bandwidths: nearly every cell differs
        return pd.to_numeric(cells)
    numbers: Any = pd.to_numeric(distinct)  # an array, as distinct is
    return pd.Series(numbers[codes], index=cells.index, name=cells.name)
