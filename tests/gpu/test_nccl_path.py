"""The NCCL path on real GPUs (`make gpu`). Skipped where there is no CUDA GPU.

What a world of one proves: every op runs and verifies under both GPU timers, graph
timing no longer depends on -n, host-bound rows are marked, variants complete, barrier
is refused under -G. NCCL ignores NCCL_ALGO on one GPU, and the side group's rule only
matters with peers, so ring vs tree and one GPU per task need >= 2 GPUs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from colbench.results import load
from colbench.timing import GRAPH_REPLAYS
from tests.conftest import run_colbench

GPUS = torch.cuda.device_count() if torch.cuda.is_available() else 0
needs_one = pytest.mark.skipif(GPUS < 1, reason="needs a CUDA GPU")
needs_two = pytest.mark.skipif(GPUS < 2, reason="needs at least 2 CUDA GPUs")

NCCL_ONE = ("--backend", "nccl", "--nprocs", "1")


def sweep(tmp_path: Path, name: str, *args: str, nprocs: int = 1) -> Any:
    """A real NCCL sweep; its rows as a DataFrame."""
    out = tmp_path / name
    proc = run_colbench(
        "sweep", "--backend", "nccl", "--nprocs", str(nprocs), "--out", str(out), *args
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return load(out)


@needs_one
@pytest.mark.parametrize("graph", [False, True], ids=["events", "graph"])
def test_every_op_is_exact_under_both_timers(tmp_path: Path, graph: bool) -> None:
    frame = sweep(
        tmp_path, "run", "--op", "all", "--sizes", "1K-4M", "--dtype", "float32,bfloat16",
        *(["-G"] if graph else []),
    )  # fmt: skip
    assert (frame["wrong"].fillna(0) == 0).all()
    assert (frame["status"] == "ok").all()
    ops = set(frame["op"])
    if graph:
        assert "barrier" not in ops and len(ops) == 9
        assert (frame["iters"] == 20 * GRAPH_REPLAYS).all()
    else:
        assert len(ops) == 10


@needs_one
def test_graph_latency_does_not_depend_on_the_batch_length(tmp_path: Path) -> None:
    per_call = {}
    for iters in ("5", "80"):
        frame = sweep(tmp_path, f"n{iters}", "--op", "all_gather", "--sizes", "1K", "-G",
                      "-n", iters, "--placement", "out")  # fmt: skip
        per_call[iters] = float(frame["time_us"].iloc[0])
    # Before the untimed first replay, -n 20 read 3.42 us and a long batch 1.08 us.
    assert 0.67 < per_call["5"] / per_call["80"] < 1.5, per_call


@needs_one
def test_launch_cost_is_marked_and_graphs_remove_it(tmp_path: Path) -> None:
    eager = sweep(tmp_path, "eager", "--op", "all_gather", "--sizes", "16-1K",
                  "--placement", "out")  # fmt: skip
    graph = sweep(tmp_path, "graph", "--op", "all_gather", "--sizes", "16-1K",
                  "--placement", "out", "-G")  # fmt: skip
    assert (eager["enqueue_us"] > 0).all()
    # torch's eager launch (tens of microseconds) dwarfs a small all_gather on one GPU.
    assert (eager["host_bound"] == 1).all(), eager
    assert graph["time_us"].median() < eager["time_us"].median() / 4


@needs_one
def test_barrier_under_cuda_graph_is_refused_in_one_line(tmp_path: Path) -> None:
    proc = run_colbench("sweep", *NCCL_ONE, "--op", "barrier", "-G", "--out", str(tmp_path / "r"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "colbench: error: --cuda-graph cannot capture barrier: it synchronises the host, "
        "which a CUDA graph cannot hold; run it without --cuda-graph"
    ]


@needs_one
def test_algorithm_and_protocol_variants_complete(tmp_path: Path) -> None:
    frame = sweep(
        tmp_path, "run", "--op", "all_reduce,all_gather", "--sizes", "1K-1M",
        "--env", "NCCL_ALGO=Ring,Tree", "--env", "NCCL_PROTO=LL,LL128,Simple",
        nprocs=min(GPUS, 2),
    )  # fmt: skip
    assert len(set(frame["variant"])) == 6
    assert (frame["wrong"].fillna(0) == 0).all()
    tree_gather = frame[
        frame["variant"].str.startswith("NCCL_ALGO=Tree") & (frame["op"] == "all_gather")
    ]
    # NCCL has no Tree all_gather: with peers those rows are unsupported; one GPU ignores
    # NCCL_ALGO and runs them.
    expected = {"unsupported"} if GPUS >= 2 else {"ok"}
    assert set(tree_gather["status"]) == expected


@needs_two
def test_ring_vs_tree_suite_runs_to_the_end(tmp_path: Path) -> None:
    proc = run_colbench(
        "sweep", "--op", "all", "--sizes", "1K-16M", "--env", "NCCL_ALGO=Ring,Tree",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    frame = load(tmp_path / "run")
    tree = frame[frame["variant"] == "NCCL_ALGO=Tree"]
    assert set(tree[tree["op"] == "all_reduce"]["status"]) == {"ok"}
    refused = tree[tree["op"].isin(["all_gather", "reduce_scatter", "broadcast", "reduce"])]
    assert set(refused["status"]) == {"unsupported"}
