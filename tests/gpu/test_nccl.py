"""Real NCCL on real GPUs. Skipped on machines without them (like CI's)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from colbench.bench.cuda_timing import GRAPH_REPLAYS, CudaEventTimer
from colbench.results.rows import load
from tests.conftest import run_colbench

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
needs_one = pytest.mark.skipif(GPUS < 1, reason="needs a CUDA GPU")
needs_two = pytest.mark.skipif(GPUS < 2, reason="needs at least 2 CUDA GPUs and NCCL")


@needs_one
def test_cuda_event_timer_times_real_device_work() -> None:
    x = torch.randn(4096, 4096, device="cuda")
    per_iter_us = CudaEventTimer().time_batch(lambda: x.matmul(x), 5)
    assert len(per_iter_us) == 5
    assert all(t > 0 for t in per_iter_us)


@needs_one
def test_single_gpu_nccl_world_of_one(tmp_path: Path) -> None:
    proc = run_colbench(
        "sweep", "--op", "all", "--sizes", "1K-1M", "--backend", "nccl", "--nprocs", "1",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(tmp_path / "run")
    assert (frame["wrong"].fillna(0) == 0).all()
    assert set(frame["backend"]) == {"nccl"}


@needs_two
def test_nccl_sweep_every_op(tmp_path: Path) -> None:
    proc = run_colbench(
        "sweep", "--op", "all", "--sizes", "1K-16M", "--dtype", "float32,bfloat16",
        "--redop", "sum,max,avg", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(tmp_path / "run")
    assert set(frame["backend"]) == {"nccl"}
    assert set(frame["world_size"]) == {GPUS}
    assert (frame["wrong"].fillna(0) == 0).all()
    big = frame[(frame["op"] == "all_reduce") & (frame["size_bytes"] == 16 * 2**20)]
    assert (big["busbw_gbps"] > 1).all()


@needs_two
def test_nccl_refuses_more_ranks_than_gpus(tmp_path: Path) -> None:
    proc = run_colbench("sweep", "--backend", "nccl", "--nprocs", str(GPUS + 1), "--sizes", "1K")
    assert proc.returncode == 2
    assert "one GPU per rank" in proc.stderr


@needs_one
def test_cuda_graph_and_rotate_on_one_gpu(tmp_path: Path) -> None:
    proc = run_colbench(
        "sweep", "--op", "all_reduce,all_gather", "--sizes", "1K-1M", "--backend", "nccl",
        "--nprocs", "1", "--cuda-graph", "5", "--rotate", "2", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(tmp_path / "run")
    assert (frame["wrong"].fillna(0) == 0).all()
    # The graph of -n calls (default 20) is replayed GRAPH_REPLAYS times, each timed.
    assert (frame["iters"] == 20 * GRAPH_REPLAYS).all()
    assert (frame["time_min_us"] <= frame["time_us"]).all()
