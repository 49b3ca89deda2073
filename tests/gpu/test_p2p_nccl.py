"""p2p on NCCL: batched isend/irecv between GPUs, timed with CUDA events (`make gpu`).

Needs 2 GPUs: NCCL refuses two ranks on one GPU. Skipped elsewhere; the NCCL calls are
checked with recording fakes in tests/unit/test_p2p_measure.py.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import torch

from colbench.commands.p2p import load
from tests.conftest import run_colbench

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.skipif(GPUS < 2, reason="needs at least 2 CUDA GPUs")
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_every_gpu_pair_is_measured(tmp_path: Path, bidirectional: bool) -> None:
    out = tmp_path / "run"
    nprocs = min(GPUS, 4)
    proc = run_colbench(
        "p2p", "--backend", "nccl", "--nprocs", str(nprocs), "--size", "16M", "-n", "5",
        "--no-plot", "--out", str(out), *(["--bidirectional"] if bidirectional else []),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    frame = load(out)
    pairs = sorted(zip(frame["src_rank"], frame["dst_rank"], strict=True))
    assert pairs == sorted(itertools.permutations(range(nprocs), 2))
    assert set(frame["backend"]) == {"nccl"}
    # GPU to GPU on one node: well above what a host copy loop would show as "network".
    assert (frame["bw_gbps"] > 1).all(), frame[["src_rank", "dst_rank", "bw_gbps"]]
    assert (frame["latency_us"] > 0).all()
