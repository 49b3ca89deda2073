"""colbench crosscheck against a real nccl-tests build (`make gpu`).

Skipped without a CUDA GPU, or without nccl-tests: its directory in NCCL_TESTS_DIR (or
its build/), else its programs on PATH.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch

from tests.conftest import run_colbench

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
NCCL_TESTS_DIR = os.environ.get("NCCL_TESTS_DIR")


def _have(program: str) -> bool:
    if NCCL_TESTS_DIR:
        base = Path(NCCL_TESTS_DIR)
        return any((d / program).is_file() for d in (base, base / "build"))
    return shutil.which(program) is not None


@pytest.mark.skipif(GPUS < 1, reason="needs a CUDA GPU")
@pytest.mark.parametrize("op", ["all_gather", "all_reduce"])
def test_crosscheck_against_nccl_tests(tmp_path: Path, op: str) -> None:
    program = f"{op}_perf"
    if not _have(program):
        pytest.skip(f"no {program}: set NCCL_TESTS_DIR or put nccl-tests on PATH")
    where = ["--nccl-tests", NCCL_TESTS_DIR] if NCCL_TESTS_DIR else []
    out = tmp_path / "cross"
    proc = run_colbench(
        "crosscheck", "--op", op, "-b", "8", "-e", "256M", "-f", "4", "--nprocs", str(GPUS),
        "--out", str(out), *where, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    joined = pd.read_csv(out / "crosscheck.csv")
    big = joined[joined["size_bytes"] >= 64 << 20]
    assert len(big) > 0 and big["comparable"].all(), proc.stdout
    # Large messages are bandwidth-bound, where colbench must time what nccl-tests times
    # (measured on one H100: 1.007x and 1.019x); small ones carry torch's launch cost.
    assert big["time_ratio"].between(0.8, 1.25).all(), proc.stdout
