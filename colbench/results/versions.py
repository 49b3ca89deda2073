"""results.csv's versions: what each changed, the version that added each column, and what
a row of an older file means in a column its file lacks (colbench.results.rows.load fills
it so, and every reader sees this version's columns).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from colbench.errors import UsageError
from colbench.host.launchers.gpus import FABRIC_REAL
from colbench.results.metafile import check_version
from colbench.results.validity import STATUS_OK

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
