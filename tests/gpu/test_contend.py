"""``--contend`` on real GPUs: a GEMM on a second CUDA stream, a second NCCL communicator.
Skipped on machines without a CUDA GPU (like CI's); tests/unit/test_contend.py checks the
stream's use with recording fakes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from colbench.results.rows import load
from tests.conftest import run_colbench
from tests.dist.test_contend import assert_collective_load_rows

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
needs_one = pytest.mark.skipif(GPUS < 1, reason="needs a CUDA GPU")


@needs_one
def test_a_gemm_on_its_own_stream_beside_nccl(tmp_path: Path) -> None:
    proc = run_colbench(
        "sweep", "--op", "all_reduce", "--sizes", "1M,16M", "--backend", "nccl",
        "--nprocs", "1", "--repeat", "3", "--contend", "gemm:4096:bfloat16",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(tmp_path / "run")
    loaded = frame[frame["load"] == "gemm:4096:bfloat16"]
    assert len(loaded) == 2 * 3 and (frame["wrong"] == 0).all()
    # A 4096 bf16 product runs at tens of TFLOP/s on any GPU NCCL supports.
    assert (loaded["load_alone_tflops"] > 1).all()
    assert (loaded["load_beside_tflops"] > 1).all()


@needs_one
def test_a_second_nccl_communicator_as_the_load_on_emulated_ranks(tmp_path: Path) -> None:
    proc = run_colbench(
        "sweep", "--op", "all_reduce", "--sizes", "1M", "--backend", "nccl",
        "--ranks-per-gpu", "2", "--nprocs", "2", "--repeat", "2",
        "--contend", "all_to_all:4M", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert_collective_load_rows(tmp_path / "run", "all_to_all:4M:float32", 2)
