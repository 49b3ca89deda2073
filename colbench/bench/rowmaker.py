"""Rows from a measurement: the one place bandwidth is computed from a combined time.

Every rank's loop (colbench.bench.loop) hands its ranks' times here, to be combined into
one row's time columns; the columns are those of :class:`colbench.results.rows.Row`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from colbench.bench.ops.data import DTYPES
from colbench.bench.plan import RunInfo, warmup_calls
from colbench.hardware.node import for_op, percent
from colbench.host.launchers.gpus import fabric
from colbench.nccl.names import FUNCTION_OP
from colbench.nccl.tuning import printed_bytes
from colbench.results.reporters.stragglers import RankTimes
from colbench.results.rows import HOST_BOUND_RATIO, TIME_COLUMNS, Row

if TYPE_CHECKING:
    from colbench.bench.ops.base import Layout
    from colbench.bench.plan import Work
    from colbench.config.model import SweepConfig


def host_bound(enqueue_us: float | None, time_us: float | None) -> int | None:
    """The ``host_bound`` cell: 1 when enqueue_us >= HOST_BOUND_RATIO * time_us, else 0;
    None when either time is missing (not measured, or no measurement)."""
    if enqueue_us is None or time_us is None or math.isnan(enqueue_us) or math.isnan(time_us):
        return None
    return int(enqueue_us >= HOST_BOUND_RATIO * time_us)


def make_row(
    info: RunInfo,
    cfg: SweepConfig,
    work: Work,
    requested_bytes: int,
    layout: Layout,
    in_place: bool,
    times: Mapping[str, float | None],
    wrong: int | None,
    iters: int | None = None,
    repeat: int = 0,
    enqueue_us: float | None = None,
    ranks: RankTimes | None = None,
    load_cells: Mapping[str, Any] | None = None,
) -> Row:
    """One row of a measurement; bandwidth is computed only here, from the combined time.

    ``iters`` is the number of timed calls when it differs from ``cfg.measure.iters``
    (``--time-budget`` picks it per size; a CUDA graph is replayed several times).
    ``times`` values are None for a row without a measurement. ``load_cells``: the
    --contend load's rates (colbench.bench.load.row_cells); none without a load.
    """
    coll = work.coll
    time_us = times["time_us"]
    algbw = None if time_us is None else coll.algbw_gbps(layout.size_bytes, time_us)
    busbw = None if algbw is None else algbw * coll.busbw_factor(info.group_size)
    algo, proto = nccl_choice(info, work, layout)
    return Row(
        **_run_cells(info),
        op=coll.name,
        dtype=work.dtype if coll.sized else "none",
        redop=work.redop,
        root=work.root,
        in_place=int(in_place),
        requested_bytes=requested_bytes,
        size_bytes=layout.size_bytes,
        count=layout.count,
        warmup=warmup_calls(info, cfg),
        iters=cfg.measure.iters if iters is None else iters,
        average=cfg.measure.average,
        time_us=time_us,
        time_min_us=times["time_min_us"],
        time_p50_us=times["time_p50_us"],
        time_p99_us=times["time_p99_us"],
        time_max_us=times["time_max_us"],
        algbw_gbps=algbw,
        busbw_gbps=busbw,
        # Every group moves its own data at the same time: their bus bandwidths add up.
        aggbw_gbps=None if busbw is None else busbw * info.groups,
        wrong=wrong,
        repeat=repeat,
        enqueue_us=enqueue_us,
        host_bound=host_bound(enqueue_us, time_us),
        **_skew_cells(ranks),
        nccl_algo=algo,
        nccl_proto=proto,
        **_ceiling_cells(info, coll, busbw),
        **_split_cells(coll, layout, time_us),
        **(load_cells or {}),
    )


#: The run's facts (RunInfo) that every row repeats as they are.
RUN_KEYS = (
    "run_id", "variant", "backend", "world_size", "nnodes", "group_size", "groups",
    "ranks_per_gpu", "split", "load", "engine",
)  # fmt: skip


def _run_cells(info: RunInfo) -> dict[str, Any]:
    """What every row of the run repeats."""
    cells = {key: getattr(info, key) for key in RUN_KEYS}
    return {**cells, "device": info.device_name, "fabric": fabric(info.ranks_per_gpu)}


def _ceiling_cells(info: RunInfo, coll: Any, busbw: float | None) -> dict[str, Any]:
    ceiling_gbps = for_op(info.ceiling_gbps, coll.exchange, info.ceiling_sharing)
    return {"ceiling_gbps": ceiling_gbps, "pct_of_ceiling": percent(busbw, ceiling_gbps)}


def _split_cells(coll: Any, layout: Layout, time_us: float | None) -> dict[str, Any]:
    """all_to_allv's pattern and what nccl-tests' definition hides: the mean rank's bytes,
    a bandwidth from them, the imbalance (empty for the other ops)."""
    mean = layout.mean_bytes
    return {
        "splits": coll.splits_label,
        "mean_bytes": mean,
        "meanbw_gbps": None if time_us is None or mean is None else coll.algbw_gbps(mean, time_us),
        "send_imbalance": layout.send_imbalance,
        "recv_imbalance": layout.recv_imbalance,
    }


def nccl_choice(info: RunInfo, work: Work, layout: Layout) -> tuple[str, str]:
    """``nccl_algo`` and ``nccl_proto`` of the row's call, as NCCL's log said (the probe
    world's, colbench.commands.sweep.probe), keyed as NCCL prints a call: its function's op and
    the bytes of one rank's share (TUNING lines of NCCL 2.24+)."""
    coll = work.coll
    if not info.nccl_choices or not coll.nccl_function:
        return "", ""
    # barrier: an all_reduce of one element of its own type, whatever the row's dtype.
    dtype, count = (
        (coll.nccl_call_type[0], 1) if coll.nccl_call_type else (work.dtype, layout.count)
    )
    op = FUNCTION_OP[coll.nccl_function]
    key = (op, printed_bytes(op, count, DTYPES[dtype].elem_bytes, info.group_size, True))
    return info.nccl_choices.get(key, ("", ""))


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of an ascending sequence."""
    if not sorted_values:
        raise ValueError("percentile of nothing")
    pos = (len(sorted_values) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


#: How ranks' batch means combine into ``time_us`` (nccl-tests' -a).
AVERAGES: dict[str, Callable[[Sequence[float]], float]] = {
    "avg": lambda means: sum(means) / len(means),
    "min": min,
    "max": max,
    "rank0": lambda means: means[0],
}


def combine_times(per_rank_iters_us: Sequence[Sequence[float]], average: str) -> dict[str, float]:
    """Combine every rank's per-iteration times into one row's time columns.

    ``time_us`` is nccl-tests' number: each rank's batch mean, combined across ranks by
    ``average`` (avg, min, max or rank0). The per-iteration statistics use, for each
    iteration, the slowest rank's time, since a collective is done only when all are.
    """
    batch_means = [sum(times) / len(times) for times in per_rank_iters_us]
    if average not in AVERAGES:
        raise ValueError(f"unknown average {average!r}")
    time_us = AVERAGES[average](batch_means)
    slowest = sorted(max(column) for column in zip(*per_rank_iters_us, strict=True))
    return {
        "time_us": time_us,
        "time_min_us": slowest[0],
        "time_p50_us": percentile(slowest, 50),
        "time_p99_us": percentile(slowest, 99),
        "time_max_us": slowest[-1],
    }


def _skew_cells(ranks: RankTimes | None) -> dict[str, Any]:
    """The straggler and rank-skew columns (empty where every rank's time is not known)."""
    if ranks is None:
        return dict.fromkeys(("slowest_rank", "skew_us", "time_ranks_avg_us", "time_ranks_max_us"))
    return {
        "slowest_rank": ranks.slowest_rank,
        "skew_us": ranks.skew_us,
        "time_ranks_avg_us": ranks.avg_us,
        "time_ranks_max_us": ranks.max_us,
    }


def unmeasured_row(
    info: RunInfo,
    cfg: SweepConfig,
    work: Work,
    requested_bytes: int,
    layout: Layout,
    in_place: bool,
    status: str,
    repeat: int = 0,
) -> Row:
    """A row without numbers: buffers that could not be allocated (``oom``) or a
    collective the backend refuses under the run's settings (``unsupported``)."""
    nothing = dict.fromkeys(TIME_COLUMNS)
    row = make_row(info, cfg, work, requested_bytes, layout, in_place, nothing, None, None, repeat)
    return dataclasses.replace(row, status=status)
