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

from colbench.bench.cuda_timing import GRAPH_REPLAYS
from colbench.bench.ops import parse_ops
from colbench.results.rows import load
from tests.conftest import finish_ranks, run_colbench, start_ranks

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
        *(["-G", "3"] if graph else []),
    )  # fmt: skip
    assert (frame["wrong"].fillna(0) == 0).all()
    assert (frame["status"] == "ok").all()
    ran = set(frame["op"])
    every = {c.name for c in parse_ops("all")}
    if graph:
        # barrier synchronises the host: a graph cannot hold it, so --op all skips it.
        assert ran == every - {"barrier"}
        # nccl-tests' -G 3: the graph of -n 20 calls launched 3 times, each call timed.
        assert (frame["iters"] == 20 * 3).all()
    else:
        assert ran == every


@needs_one
def test_graph_latency_does_not_depend_on_the_batch_length(tmp_path: Path) -> None:
    """Once the batch hides the host's launch of each replay. A replay of n calls costs the
    device n x d plus a gap L while the host launches the next: per call d + L/n. One H200
    (world of 1, all_gather 1K): -n 5 read 2.18 and 3.57 us, -n 80 0.81 and 0.88 us, so
    d = 0.70 us and L = 7-14 us; -n 40 then reads at most 1.4x -n 80 (docs/gpu.md)."""
    per_call = {}
    for iters in ("40", "80"):
        frame = sweep(tmp_path, f"n{iters}", "--op", "all_gather", "--sizes", "1K", "-G", "5",
                      "-n", iters, "--placement", "out")  # fmt: skip
        per_call[iters] = float(frame["time_us"].iloc[0])
    # Before the untimed first replay, -n 20 read 3.42 us and a long batch 1.08 us.
    assert 0.67 < per_call["40"] / per_call["80"] < 1.5, per_call


@needs_one
def test_launch_cost_is_marked_and_graphs_remove_it(tmp_path: Path) -> None:
    eager = sweep(tmp_path, "eager", "--op", "all_gather", "--sizes", "16-1K",
                  "--placement", "out")  # fmt: skip
    graph = sweep(tmp_path, "graph", "--op", "all_gather", "--sizes", "16-1K",
                  "--placement", "out", "-G", "5")  # fmt: skip
    assert (eager["enqueue_us"] > 0).all()
    # torch's eager launch (tens of microseconds) dwarfs a small all_gather on one GPU.
    assert (eager["host_bound"] == 1).all(), eager
    assert graph["time_us"].median() < eager["time_us"].median() / 4


@needs_one
def test_barrier_under_cuda_graph_is_refused_in_one_line(tmp_path: Path) -> None:
    proc = run_colbench(
        "sweep", *NCCL_ONE, "--op", "barrier", "-G", "5", "--out", str(tmp_path / "r")
    )
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


@needs_one
@pytest.mark.parametrize("graph", [False, True], ids=["events", "graph"])
def test_a_stalled_gpu_is_a_hang_not_a_crash(tmp_path: Path, graph: bool) -> None:
    """The device stalls (a spinning kernel before the 2nd timed batch): the host blocks
    in a CUDA synchronize, as in a collective or graph replay that never completes."""
    proc = run_colbench(
        "sweep", *NCCL_ONE, "--op", "all_reduce", "--sizes", "1K-64K", "--timeout", "5",
        *(["-G", str(GRAPH_REPLAYS)] if graph else []), "--out", str(tmp_path / "run"),
        env={"COLBENCH_FAULT": "0:2:device-hang"}, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert "timed out after 5 s (--timeout) during timed batch of all_reduce" in proc.stderr
    assert len(load(tmp_path / "run")) == 1  # the row measured before the stall is kept


def launch_by_hand(tmp_path: Path, visible: list[str], *args: str) -> list[tuple[int, str]]:
    """Ranks started as srun --gpus-per-task=1 would: each sees only its own GPU(s)."""
    sweep_args = ["sweep", "--backend", "nccl", "--no-table", "--out", str(tmp_path / "run")]
    procs = start_ranks(
        len(visible),
        lambda rank: [*sweep_args, *args],
        lambda rank: {"CUDA_VISIBLE_DEVICES": visible[rank]},
    )
    return finish_ranks(procs, 180)


@needs_one
def test_two_ranks_on_one_physical_gpu_are_refused(tmp_path: Path) -> None:
    results = launch_by_hand(tmp_path, ["0", "0"], "--sizes", "1K")
    for code, stderr in results:
        assert code == 2, stderr[-2000:]
        assert "ranks 0, 1 share GPU" in stderr, stderr[-2000:]


@needs_one
def test_auto_backend_measures_nccl_on_one_gpu(tmp_path: Path) -> None:
    if GPUS != 1:
        pytest.skip("the one-GPU default needs exactly one visible GPU")
    proc = run_colbench("sweep", "--op", "all_gather", "--sizes", "1K-64K",
                        "--out", str(tmp_path / "run"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "one GPU: measuring NCCL with 1 rank" in proc.stderr
    frame = load(tmp_path / "run")
    assert set(frame["backend"]) == {"nccl"} and set(frame["world_size"]) == {1}


@needs_two
def test_one_gpu_per_task_through_cuda_visible_devices(tmp_path: Path) -> None:
    results = launch_by_hand(tmp_path, ["0", "1"], "--op", "all_reduce,all_gather",
                             "--sizes", "1K-1M")  # fmt: skip
    for code, stderr in results:
        assert code == 0, stderr[-2000:]
    frame = load(tmp_path / "run")
    assert set(frame["world_size"]) == {2} and (frame["wrong"].fillna(0) == 0).all()


@needs_two
def test_a_hung_rank_is_named(tmp_path: Path) -> None:
    proc = run_colbench(
        "sweep", "--backend", "nccl", "--nprocs", "2", "--op", "all_reduce", "--sizes", "1K-64K",
        "--timeout", "5", "--out", str(tmp_path / "run"), env={"COLBENCH_FAULT": "1:2:hang"},
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 4, proc.stderr[-3000:]
    assert "rank(s) 1" in proc.stderr and "timed batch of all_reduce" in proc.stderr
