"""Combining per-rank times and expanding a config into work (sweep.bench, sweep.plan)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from colbench.bench import ops
from colbench.bench.ops.base import Layout
from colbench.bench.plan import count_units, plan
from colbench.bench.rowmaker import combine_times, percentile
from colbench.config.model import SweepConfig

# Three ranks, four iterations each (microseconds).
PER_RANK = [
    [1.0, 2.0, 3.0, 4.0],  # batch mean 2.5
    [2.0, 2.0, 2.0, 10.0],  # batch mean 4.0
    [0.5, 5.0, 1.0, 1.0],  # batch mean 1.875
]


@pytest.mark.parametrize(
    ("average", "time_us"),
    [("avg", (2.5 + 4.0 + 1.875) / 3), ("min", 1.875), ("max", 4.0), ("rank0", 2.5)],
)
def test_time_us_combines_batch_means(average: str, time_us: float) -> None:
    assert combine_times(PER_RANK, average)["time_us"] == pytest.approx(time_us)


def test_iteration_stats_use_the_slowest_rank_of_each_iteration() -> None:
    # Slowest rank per iteration: 2, 5, 3, 10 -> sorted 2, 3, 5, 10.
    times = combine_times(PER_RANK, "avg")
    assert times["time_min_us"] == 2.0
    assert times["time_p50_us"] == pytest.approx(4.0)  # halfway between 3 and 5
    assert times["time_p99_us"] == pytest.approx(5.0 + (10.0 - 5.0) * 0.97)  # pos 2.97
    assert times["time_max_us"] == 10.0
    assert set(times) == {"time_us", "time_min_us", "time_p50_us", "time_p99_us", "time_max_us"}


def test_one_rank_one_iteration() -> None:
    times = combine_times([[7.0]], "rank0")
    assert times == {
        "time_us": 7.0,
        "time_min_us": 7.0,
        "time_p50_us": 7.0,
        "time_p99_us": 7.0,
        "time_max_us": 7.0,
    }


def test_unknown_average_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown average"):
        combine_times(PER_RANK, "median")


def test_ranks_with_different_iteration_counts_are_refused() -> None:
    with pytest.raises(ValueError):
        combine_times([[1.0, 2.0], [1.0]], "avg")


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([1.0, 2.0, 3.0, 4.0], 0, 1.0),
        ([1.0, 2.0, 3.0, 4.0], 100, 4.0),
        ([1.0, 2.0, 3.0, 4.0], 25, 1.75),
        ([10.0, 20.0], 99, 19.9),
        ([5.0], 99, 5.0),
    ],
)
def test_percentile_by_hand(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def test_percentile_matches_numpy_linear() -> None:
    rng = random.Random(1234)
    for length in (1, 2, 3, 7, 20, 101, 1000):
        values = sorted(rng.uniform(0, 1000) for _ in range(length))
        for q in (0, 1, 10, 25, 50, 75, 90, 99, 99.9, 100):
            want = float(np.percentile(values, q, method="linear"))
            assert percentile(values, q) == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_percentile_of_nothing() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)


def cfg(**kwargs: Any) -> SweepConfig:
    base: dict[str, Any] = {"sizes_bytes": (1024, 65536)}
    base.update(kwargs)
    return SweepConfig.of(**base)


def test_ops_without_a_redop_get_none() -> None:
    work = plan(cfg(ops=("all_gather", "broadcast"), redops=("sum", "max")), 2, "gloo")
    assert [(w.coll.name, w.redop) for w in work] == [("all_gather", "none"), ("broadcast", "none")]


def test_reducing_ops_get_every_redop_and_avg_skips_int_dtypes() -> None:
    work = plan(
        cfg(ops=("all_reduce",), dtypes=("float32", "int32"), redops=("sum", "avg")), 2, "gloo"
    )
    assert [(w.dtype, w.redop) for w in work] == [
        ("float32", "sum"),
        ("float32", "avg"),
        ("int32", "sum"),
    ]


def test_sizes_that_round_to_no_chunk_are_skipped_and_reported() -> None:
    work = plan(cfg(ops=("all_gather", "all_reduce"), sizes_bytes=(8, 32, 1024)), 2, "gloo")
    by_op = {w.coll.name: w for w in work}
    gather = by_op["all_gather"]
    # 8 B over 2 ranks is 4 B each: no whole 16-byte chunk. 32 B is exactly one.
    assert gather.skipped_sizes == (8,)
    assert gather.requested == (32, 1024)
    assert [lay.count for lay in gather.layouts] == [4, 128]
    # all_reduce does not split by rank: every size runs.
    assert by_op["all_reduce"].requested == (8, 32, 1024)
    assert by_op["all_reduce"].skipped_sizes == ()


def test_a_combination_with_every_size_skipped_is_still_reported() -> None:
    work = plan(cfg(ops=("all_gather",), sizes_bytes=(8,)), 2, "gloo")
    assert [w.skipped_sizes for w in work if w.coll.name == "all_gather"] == [(8,)]


def test_barrier_is_one_item_of_size_zero() -> None:
    work = plan(cfg(ops=("barrier",), dtypes=("bfloat16", "int8"), redops=("max",)), 4, "gloo")
    assert len(work) == 1
    (item,) = work
    assert item.coll.name == "barrier"
    assert item.requested == (0,)
    assert item.layouts == (Layout(0, 0, 0, 0),)
    assert item.redop == "none"
    assert item.skipped_sizes == ()


def test_placements_follow_the_op() -> None:
    names = tuple(op.name for op in ops.REGISTRY if op.sized)
    work = plan(cfg(ops=names), 3, "gloo")
    for item in work:
        assert item.placements == tuple(p for p in ("out", "in") if p in item.coll.placements)
    by_op = {w.coll.name: w.placements for w in work}
    assert by_op["all_reduce"] == ("in",)
    assert by_op["all_gather"] == ("out", "in")
    assert by_op["sendrecv"] == ("out",)


def test_requested_placements_filter_the_ops() -> None:
    work = plan(cfg(ops=("all_reduce", "all_gather"), placements=("out",)), 2, "gloo")
    # all_reduce has no out-of-place form, so nothing of it runs.
    assert [(w.coll.name, w.placements) for w in work] == [("all_gather", ("out",))]


def test_unsupported_ops_are_left_out() -> None:
    work = plan(cfg(ops=("sendrecv", "all_gather")), 1, "gloo")
    assert [w.coll.name for w in work] == ["all_gather"]
    assert [w.coll.name for w in plan(cfg(ops=("sendrecv",)), 1, "nccl")] == ["sendrecv"]


def test_count_units_counts_rows() -> None:
    work = plan(cfg(ops=("all_reduce", "all_gather", "barrier")), 2, "gloo")
    # all_reduce: 2 sizes x 1 placement; all_gather: 2 x 2; barrier: 1 x 1.
    assert count_units(work) == 2 + 4 + 1
