"""Real NCCL worlds of 2-4 ranks on one GPU (--ranks-per-gpu), run by `make gpu` first.

Every rank is an NCCL node of its own (its own NCCL_HOSTID), so NCCL connects ranks over
its network transport on loopback and Ring, Tree and PAT are real choices. The tests run
in the issue's order of priority (pytest keeps file order), so a lease that ends early
has run the most important ones. Skipped without a CUDA GPU.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from colbench.bench import ops
from colbench.results.rows import load
from tests.conftest import REPO, run_colbench

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
pytestmark = pytest.mark.skipif(GPUS < 1, reason="needs a CUDA GPU")

#: K ranks per GPU with K ranks in all: every rank on GPU 0, however many GPUs there are.
FAST = ("-n", "3", "-w", "1", "--no-table")


def emulated(tmp_path: Path, name: str, ranks: int, *args: str, timeout: float = 600) -> Any:
    out = tmp_path / name
    proc = run_colbench(
        "sweep", "--backend", "nccl", "--nprocs", str(ranks), "--ranks-per-gpu", str(ranks),
        "--out", str(out), *FAST, *args, timeout=timeout,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    frame = load(out)
    assert set(frame["fabric"]) == {"emulated"} and set(frame["ranks_per_gpu"]) == {ranks}
    print(f"\n{name}: {len(frame)} rows; median time per call by op (us):")
    print(frame.groupby("op")["time_us"].median().round(1).to_string())
    return frame


def test_every_op_dtype_and_redop_is_exact_at_4_ranks(tmp_path: Path) -> None:
    frame = emulated(tmp_path, "exact", 4, "--op", "all", "--sizes", "1K-64K",
                     "--dtype", "float32,bfloat16,int8", "--redop", "all")  # fmt: skip
    measured = frame[frame["status"] == "ok"]
    assert (measured["wrong"].fillna(0) == 0).all(), measured[measured["wrong"] > 0]
    assert set(frame["status"]) == {"ok"}, "unsupported combinations are skipped, not rows"
    reducing = measured[measured["redop"] != "none"]
    assert set(reducing["redop"]) == {"sum", "prod", "min", "max", "avg"}
    # int avg does not exist in torch: those combinations are not rows at all.
    assert reducing[(reducing["dtype"] == "int8") & (reducing["redop"] == "avg")].empty
    # barrier carries no data, so no dtype ("none").
    assert set(measured[measured["op"] != "barrier"]["dtype"]) == {"float32", "bfloat16", "int8"}
    assert set(frame["op"]) == {c.name for c in ops.parse_ops("all")}


def test_group_size_2_at_4_ranks(tmp_path: Path) -> None:
    frame = emulated(tmp_path, "groups", 4, "--op", "all_reduce,all_gather", "--sizes", "1K-64K",
                     "--group-size", "2")  # fmt: skip
    assert set(frame["group_size"]) == {2} and set(frame["groups"]) == {2}
    assert (frame["wrong"].fillna(0) == 0).all()


def test_cuda_graphs_at_4_ranks_sendrecv_included(tmp_path: Path) -> None:
    frame = emulated(tmp_path, "graph", 4, "--op", "all_reduce,all_gather,sendrecv",
                     "--sizes", "1K-64K", "-G", "5")  # fmt: skip
    assert set(frame["op"]) == {"all_reduce", "all_gather", "sendrecv"}
    assert (frame["wrong"].fillna(0) == 0).all()


@pytest.mark.parametrize("ranks", [2, 4])
def test_ring_tree_pat_run_what_was_asked(tmp_path: Path, ranks: int) -> None:
    frame = emulated(
        tmp_path, f"algo{ranks}", ranks, "--op", "all_reduce,all_gather,reduce_scatter,broadcast",
        "--sizes", "4K-4M", "--env", "NCCL_ALGO=Ring,Tree,PAT",
    )  # fmt: skip
    print(frame.groupby(["variant", "op"])["nccl_algo"].agg(lambda s: sorted(set(s))).to_string())
    for (variant, op), rows in frame.groupby(["variant", "op"]):
        asked = variant.split("=", 1)[1].upper()
        ran = rows[rows["status"] == "ok"]
        # NCCL: Tree is all_reduce's only; PAT is all_gather's and reduce_scatter's (one
        # GPU per node, as every emulated node is); Ring is everyone's.
        supported = {"RING": True, "TREE": op == "all_reduce",
                     "PAT": op in ("all_gather", "reduce_scatter")}[asked]  # fmt: skip
        if supported:
            assert len(ran) == len(rows), (variant, op, set(rows["status"]))
            ran_algos = {str(a).upper() for a in ran["nccl_algo"]}
            assert ran_algos == {asked}, (variant, op, ran_algos)
        else:
            assert set(rows["status"]) == {"unsupported"}, (variant, op)
    assert (frame["wrong"].fillna(0) == 0).all()


def test_interleaved_variants_of_two_worlds_of_2(tmp_path: Path) -> None:
    frame = emulated(tmp_path, "interleaved", 2, "--op", "all_reduce", "--sizes", "1K-1M",
                     "--env", "NCCL_PROTO=LL,Simple", "--repeat", "2")  # fmt: skip
    assert set(frame["variant"]) == {"NCCL_PROTO=LL", "NCCL_PROTO=Simple"}
    assert set(frame["repeat"]) == {0, 1}


def test_p2p_matrix_at_3_ranks(tmp_path: Path) -> None:
    proc = run_colbench(
        "p2p", "--backend", "nccl", "--nprocs", "3", "--ranks-per-gpu", "3",
        "--size", "4M", "-n", "5", "--out", str(tmp_path / "p2p"), timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    from colbench.commands.p2p.results import load as load_p2p

    frame = load_p2p(tmp_path / "p2p")
    pairs = set(zip(frame["src_rank"], frame["dst_rank"], strict=True))
    assert len(pairs) == 6  # every ordered pair of 3 ranks, in every pass
    assert (frame["bw_gbps"] > 0).all()


def test_a_hung_rank_is_named_at_2_ranks(tmp_path: Path) -> None:
    proc = run_colbench(
        "sweep", "--backend", "nccl", "--nprocs", "2", "--ranks-per-gpu", "2",
        "--op", "all_reduce", "--sizes", "1K-64K", "--timeout", "10",
        "--out", str(tmp_path / "run"), env={"COLBENCH_FAULT": "1:2:hang"}, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert "rank(s) 1" in proc.stderr and "timed batch of all_reduce" in proc.stderr


def test_ranks_started_by_torchrun(tmp_path: Path) -> None:
    torchrun = shutil.which("torchrun") or ""
    cmd = (
        [torchrun] if torchrun else [sys.executable, "-m", "torch.distributed.run"]
    ) + [
        "--standalone", "--nproc-per-node", "2", "-m", "colbench", "sweep",
        "--backend", "nccl", "--ranks-per-gpu", "2", "--op", "all_reduce,all_gather",
        "--sizes", "1K-1M", *FAST, "--out", str(tmp_path / "run"),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-4000:]
    frame = load(tmp_path / "run")
    assert set(frame["fabric"]) == {"emulated"} and set(frame["world_size"]) == {2}
    assert (frame["wrong"].fillna(0) == 0).all()


def test_emulated_nodes_in_nccls_own_words(tmp_path: Path) -> None:
    """NCCL's start-up log (rank files, never the terminal): one node per rank, and every
    peer connection over the network transport."""
    emulated(tmp_path, "log", 2, "--op", "all_reduce", "--sizes", "1M")
    logs = sorted((tmp_path / "log").glob("nccl-rank*.log"))
    assert len(logs) == 2
    text = logs[0].read_text(errors="replace")
    assert "NCCL_HOSTID set by environment" in text
    assert "via NET/Socket" in text and "via P2P" not in text and "via SHM" not in text
