"""The direct NCCL engine (--engine nccl) over real gloo ranks, with a recording nccl4py.

Two forked ranks run colbench's per-rank loop with the direct engine on CPU: its
communicator comes from NCCL's unique-id bootstrap over the real gloo side group, every
op makes its direct call through the fake nccl4py (tests/fakenccl), which records what it
was asked and moves the data as NCCL would, and colbench's own verification checks the
results. What only a GPU can show (CUDA streams and events, ncclMemAlloc, the speed) is
in tests/gpu/test_direct_nccl.py.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch.distributed as dist
import torch.multiprocessing as mp

from colbench.bench.groups import Groups, SideGroup
from colbench.bench.loop import BenchContext, RankBench
from colbench.bench.plan import RunInfo, plan
from colbench.config.model import SweepConfig
from colbench.host.launchers.rendezvous import free_port
from colbench.results.rows import RESULTS, load
from colbench.results.tables import TableWriter
from tests.fakegpu import FAKE_GPU, REPO, gpu, run_on_fake_gpus
from tests.fakenccl import FAKE_NCCL, records

pytestmark = pytest.mark.dist

OPS = (
    "all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all",
    "all_to_allv", "gather", "scatter", "sendrecv", "barrier",
)  # fmt: skip
WARMUP, ITERS = 1, 3
#: NCCL 2.28.9 has ncclAlltoAll, ncclGather and ncclScatter; 2.27.3 has not.
NATIVE, GROUPED = 22809, 22703


def _rank(rank: int, port: int, out: str, nccl_version: int) -> None:
    os.environ["COLBENCH_FAKE_NCCL_DIR"] = out
    os.environ["COLBENCH_FAKE_NCCL_VERSION"] = str(nccl_version)
    sys.path.insert(0, str(FAKE_NCCL))
    from colbench.direct.engine import DirectEngine

    store = dist.TCPStore(
        "127.0.0.1", port, 2, is_master=rank == 0, timeout=datetime.timedelta(seconds=60)
    )
    # A direct world's torch group is gloo (colbench.host.child).
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
    try:
        cfg = SweepConfig.of(
            ops=OPS, sizes_bytes=(1024, 65536), dtypes=("float32", "bfloat16"),
            redops=("sum", "max"), iters=ITERS, warmup=WARMUP, engines=("nccl",),
        )  # fmt: skip
        side = SideGroup(dist.new_group(backend="gloo"), 2)
        engine = DirectEngine.create(side, rank, (0, 1))
        info = RunInfo("direct", "gloo", "cpu", 2, 1, engine="nccl")
        context = BenchContext.on_cpu(cfg, info, rank, Groups(side))
        context = dataclasses.replace(context, engine=engine)
        writer = TableWriter(Path(out) / "results.csv", RESULTS) if rank == 0 else None

        class Sink:
            def rows(self, coll: Any, rows: Any) -> None:
                assert writer is not None
                for row in rows:
                    writer.write(row)

            def note(self, message: str) -> None:
                pass

        RankBench(context, Sink() if writer is not None else None).run(plan(cfg, 2, "gloo"))
        engine.close()
        if writer is not None:
            writer.close()
    finally:
        dist.destroy_process_group()


def _run(tmp: Path, nccl_version: int) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    tmp.mkdir()
    # Forked, as colbench starts its gloo ranks: a rank is ready without importing torch
    # again (seconds of CPU each); the fake NCCL and its variables enter the child only.
    mp.start_processes(
        _rank, args=(free_port(), str(tmp), nccl_version), nprocs=2, start_method="fork"
    )
    return load(tmp / "results.csv"), records(tmp)


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    return _run(tmp_path_factory.mktemp("direct") / "native", NATIVE)


@pytest.fixture(scope="module")
def grouped(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    return _run(tmp_path_factory.mktemp("direct") / "grouped", GROUPED)


def test_every_op_is_exact_through_ncclcalls(native: Any) -> None:
    frame, _ = native
    measured = frame[frame["op"] != "barrier"]
    assert set(measured["op"]) == set(OPS) - {"barrier"}
    assert (measured["status"] == "ok").all()
    assert (measured["wrong"] == 0).all(), measured[measured["wrong"] != 0]
    assert set(frame["engine"]) == {"nccl"}
    # NCCL has no barrier call: said, not faked with another op.
    assert set(frame[frame["op"] == "barrier"]["status"]) == {"unsupported"}


def test_the_communicator_comes_from_rank_0s_id_over_the_side_group(native: Any) -> None:
    _, calls = native
    made = [c for c in calls if c["call"] == "get_unique_id"]
    assert len(made) == 1
    inits = sorted((c for c in calls if c["call"] == "comm_init"), key=lambda c: c["rank"])
    assert [(c["rank"], c["nranks"]) for c in inits] == [(0, 2), (1, 2)]
    assert {c["id"] for c in inits} == {made[0]["id"]}
    assert len([c for c in calls if c["call"] == "comm_destroy"]) == 2


def test_one_call_per_iteration_on_pointers_resolved_once_per_size(native: Any) -> None:
    _, calls = native
    reduces = [c for c in calls if c["call"] == "all_reduce" and c["rank"] == 0]
    # One buffer set per (dtype, redop, size): its warm-up, timed batch and verifying
    # call name the same pointers, count and types, and nothing else is called.
    per_set = Counter((c["send"], c["recv"], c["count"], c["dtype"], c["op"]) for c in reduces)
    assert len(per_set) == 2 * 2 * 2
    assert set(per_set.values()) == {WARMUP + ITERS + 1}
    # In place: one buffer.
    assert all(c["send"] == c["recv"] for c in reduces)
    # Every call on the engine's stream (none on a CPU: 0, the default).
    assert {c["stream"] for c in calls if "stream" in c} == {0}


def test_buffers_come_from_ncclmemalloc(native: Any) -> None:
    _, calls = native
    allocs = [c for c in calls if c["call"] == "mem_alloc"]
    assert {c["dtype"] for c in allocs} == {"float32", "bfloat16"}


def test_exchanges_are_native_from_nccl_2_28(native: Any) -> None:
    _, calls = native
    names = {c["call"] for c in calls}
    assert {"allto_all", "gather", "scatter"} <= names
    groups = [c["calls"] for c in calls if c["call"] == "group"]
    # Only all_to_allv and sendrecv are grouped send/recv.
    assert groups and all(set(g) == {"send", "recv"} for g in groups)


def test_exchanges_are_grouped_send_recv_before_nccl_2_28(grouped: Any) -> None:
    frame, calls = grouped
    measured = frame[frame["op"] != "barrier"]
    assert (measured["wrong"] == 0).all(), measured[measured["wrong"] != 0]
    assert not {"allto_all", "gather", "scatter"} & {c["call"] for c in calls}
    # gather's root receives each rank's chunk (its own included), each rank sends once.
    assert any(
        g == ["send", "recv", "recv"] for g in (c["calls"] for c in calls if c["call"] == "group")
    )


# The whole command on fake GPUs (tests/fakegpu): the CLI, the parent's checks, spawned
# ranks, their start-up. The ranks stop at the first fill (no CUDA memory here).
SWEEP = ("sweep", "--engine", "nccl", "--sizes", "1K", "--no-table", "--no-nccl-probe")


def test_a_direct_world_makes_no_torch_nccl_communicator(tmp_path: Path) -> None:
    nccl_dir = tmp_path / "nccl"
    nccl_dir.mkdir()
    env = {
        "PYTHONPATH": os.pathsep.join(map(str, (FAKE_GPU, FAKE_NCCL, REPO))),
        "COLBENCH_FAKE_NCCL_DIR": str(nccl_dir),
    }
    run = run_on_fake_gpus(
        tmp_path, [gpu(0), gpu(1)], *SWEEP, "--out", str(tmp_path / "run"), env=env
    )
    assert run.returncode == 3, run.stderr
    assert "fill of all_reduce" in run.stderr
    # torch's init_process_group("nccl") was never called: the ranks' group is gloo.
    assert not run.inits()
    calls = records(nccl_dir)
    made = [c for c in calls if c["call"] == "get_unique_id"]
    inits = [c for c in calls if c["call"] == "comm_init"]
    assert len(made) == 1 and sorted(c["rank"] for c in inits) == [0, 1]
    assert {c["id"] for c in inits} == {made[0]["id"]}
    # Each rank made a stream of its own and made it current (the timers record there).
    streams = run.calls("stream", role="rank")
    assert sorted(s["index"] for s in streams) == [0, 1]
    assert len(run.calls("set_stream", role="rank")) == 2
    # Buffers from ncclMemAlloc; the failed rank's communicator aborted, not destroyed
    # (destroy would wait for the node's other ranks).
    assert [c["numel"] for c in calls if c["call"] == "mem_alloc"] == [256, 256]
    assert len([c for c in calls if c["call"] == "comm_abort"]) == 2
    assert not [c for c in calls if c["call"] == "comm_destroy"]


def test_without_nccl4py_engine_nccl_is_one_line_exit_2(tmp_path: Path) -> None:
    run = run_on_fake_gpus(tmp_path, [gpu(0)], *SWEEP, "--out", str(tmp_path / "run"))
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert lines == ["colbench: error: --engine nccl needs nccl4py, which is not installed: "
                     "pip install 'colbench[nccl]'"]  # fmt: skip
    # Refused in the parent: no rank started.
    assert not run.calls("set_device")
