"""The direct NCCL engine (--engine nccl) on a real GPU. Skipped without CUDA or nccl4py.

The order is the issue's (37): the library nccl4py loaded is torch's, every op exact on
both engines in a world of one (eager and under -G), then 4 emulated ranks; then NCCL's
newer knobs (-R 1 and 2, -x) on the direct engine. The figures
(direct engine against nccl-tests, the torch tax per setting) are
benchmarks/direct_nccl_gpu.py's, which writes its raw output for docs/gpu.md.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from colbench.results.rows import load
from tests.conftest import run_colbench

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
HAS_NCCL4PY = importlib.util.find_spec("nccl") is not None
needs_direct = pytest.mark.skipif(
    GPUS < 1 or not HAS_NCCL4PY, reason="needs a CUDA GPU and nccl4py (docs/gpu.md)"
)
EXACT = ("--op", "all", "--dtype", "float32,bfloat16", "--redop", "sum,max",
         "--sizes", "1K-1M", "--iters", "5", "--warmup", "2")  # fmt: skip


@needs_direct
def test_nccl4py_loads_the_nccl_torch_loaded() -> None:
    from colbench.direct.nccl4py import Nccl, version_text

    raw = torch.cuda.nccl.version()
    ours = version_text(Nccl().version())
    assert ours == ".".join(map(str, raw)), f"nccl4py loaded NCCL {ours}, torch has {raw}"


def _both_engines_exact(tmp_path: Path, *more: str, nprocs: int = 1) -> None:
    proc = run_colbench(
        "sweep", "--engine", "torch,nccl", *EXACT, "--nprocs", str(nprocs),
        "--out", str(tmp_path / "run"), *more, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(tmp_path / "run")
    assert set(frame["engine"]) == {"torch", "nccl"}
    measured = frame[frame["status"] == "ok"]
    assert (measured["wrong"] == 0).all(), measured[measured["wrong"] != 0]
    # Every op NCCL has a call for is measured on both engines; barrier only on torch.
    by_engine = measured.groupby("engine")["op"].agg(set)
    assert by_engine["torch"] - by_engine["nccl"] <= {"barrier"}
    assert "torch tax" in proc.stdout


@needs_direct
def test_every_op_exact_on_both_engines_eager(tmp_path: Path) -> None:
    _both_engines_exact(tmp_path)


@needs_direct
def test_every_op_exact_on_both_engines_in_a_cuda_graph(tmp_path: Path) -> None:
    _both_engines_exact(tmp_path, "--cuda-graph", "5")


@needs_direct
def test_four_emulated_ranks_on_both_engines_exact(tmp_path: Path) -> None:
    _both_engines_exact(tmp_path, "--ranks-per-gpu", "4", "--sizes", "1K-64K", nprocs=4)


# NCCL's newer knobs (issue 37 item 4): nccl-tests' -R and -x on the direct engine.
KNOBS = ("sweep", "--engine", "nccl", "--op", "all_reduce,all_gather,reduce_scatter",
         "--sizes", "1K-1M", "--iters", "5", "--warmup", "2")  # fmt: skip


@needs_direct
@pytest.mark.parametrize("mode", ["1", "2"])
def test_registered_buffers_are_exact_in_a_world_of_one(tmp_path: Path, mode: str) -> None:
    proc = run_colbench(*KNOBS, "-R", mode, "--nprocs", "1", "--out", str(tmp_path / "run"),
                        timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(tmp_path / "run")
    # Registered (NCCL gave a handle) and exact, or every row unsupported with the reason.
    if (frame["status"] == "unsupported").all():
        assert "unsupported on --engine nccl: --register" in proc.stderr
    else:
        assert (frame["status"] == "ok").all() and (frame["wrong"] == 0).all()


@needs_direct
def test_symmetric_windows_say_what_nccl_ran_or_why_not(tmp_path: Path) -> None:
    # Two ranks, so NCCL has a choice and the probe logs it (emulated nodes on one GPU:
    # NCCL may find no symmetric memory between them, and must then say so).
    proc = run_colbench(*KNOBS, "-R", "2", "--ranks-per-gpu", "2", "--nprocs", "2",
                        "--out", str(tmp_path / "run"), timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(tmp_path / "run")
    measured = frame[frame["status"] == "ok"]
    if measured.empty:
        assert "unsupported on --engine nccl: " in proc.stderr
    else:
        assert (measured["wrong"] == 0).all()
        assert "symmetric kernels in" in proc.stderr


@needs_direct
def test_cta_policies_are_variants_nccl_says_it_read(tmp_path: Path) -> None:
    proc = run_colbench(*KNOBS, "-x", "0,1", "--ranks-per-gpu", "2", "--nprocs", "2",
                        "--out", str(tmp_path / "run"), timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(tmp_path / "run")
    assert set(frame["variant"]) == {"NCCL_CTA_POLICY=0", "NCCL_CTA_POLICY=1"}
    assert (frame[frame["status"] == "ok"]["wrong"] == 0).all()
    # NCCL 2.27-2.28 log the variable as read; later releases read it without a line.
    assert "NCCL_CTA_POLICY=1 (NCCL read it)" in proc.stderr or "NCCL_CTA_POLICY=1 asked" in (
        proc.stderr
    )


@needs_direct
@pytest.mark.parametrize("more", [("--contend", "all_reduce:1M"), ("--group-size", "1")])
def test_contend_and_group_size_on_the_direct_engine(tmp_path: Path, more: tuple[str, ...]) -> None:
    # --contend's collective load goes through torch's NCCL on a group of its own beside
    # the direct engine's communicator; --group-size 1: one communicator per rank.
    proc = run_colbench(*KNOBS, *more, "--ranks-per-gpu", "2", "--nprocs", "2",
                        "--out", str(tmp_path / "run"), timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    frame = load(tmp_path / "run")
    measured = frame[frame["status"] == "ok"]
    assert not measured.empty and (measured["wrong"] == 0).all()
