"""--time-budget, --rotate and --cuda-graph on real gloo ranks."""

from __future__ import annotations

from pathlib import Path

from colbench.results.rows import load
from tests.conftest import call_colbench


def test_time_budget_adapts_iterations_per_size(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "all_gather", "--sizes", "1K,256K", "-n", "2", "-w", "1",
        "--time-budget", "0.3", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = load(out)
    assert (rows["wrong"] == 0).all()
    # -n is the minimum; a 1K call takes well under the 0.15 s that 2 calls would need.
    assert (rows["iters"] >= 2).all()
    small = rows[rows["requested_bytes"] == 1024]
    assert (small["iters"] > 2).all()
    # The batch length follows the call's cost: a fixed count would be the same everywhere.
    assert rows["iters"].nunique() > 1


def test_rotate_keeps_results_correct(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "all_reduce,all_gather,reduce_scatter", "--sizes", "4K,64K",
        "--rotate", "3", "-n", "5", "-w", "1", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = load(out)
    assert len(rows) == 2 * (1 + 2 + 2)
    assert (rows["wrong"] == 0).all()


def test_rotate_counts_in_the_memory_check(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = call_colbench(
        "sweep", "--op", "all_reduce", "--sizes", "1M,32M", "--rotate", "4",
        "--memory-limit", "160M", "-n", "1", "-w", "0", "--out", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # 4 sets of 32M plus scratch exceed 160M; 4 sets of 1M do not.
    assert "sizes from 33554432 B need 192 MiB" in proc.stderr
    assert set(load(out)["requested_bytes"]) == {1 << 20}


def test_cuda_graph_needs_nccl(tmp_path: Path) -> None:
    proc = call_colbench("sweep", "--backend", "gloo", "--cuda-graph", "5", "--sizes", "1K")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "colbench: error: --cuda-graph captures NCCL calls in a CUDA graph; it needs --backend nccl"
    ]
