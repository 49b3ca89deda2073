"""The direct engine's knobs and companions over real gloo ranks, with the recording
nccl4py (tests/fakenccl): --register local and symmetric (nccl-tests' -R 1 and 2), their
refusals as unsupported rows with the reason, --group-size (a communicator per group,
each from its own unique id) and --contend (a load beside the direct engine's calls).

Each world is colbench's per-rank loop, as tests/dist/test_direct_engine.py runs it; the
fake moves the data as NCCL would, so colbench's own verification checks every row.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from colbench.bench.groups import Groups, SideGroup, members, split_world
from colbench.bench.load import make_load
from colbench.bench.loop import BenchContext, RankBench
from colbench.bench.plan import RunInfo, plan
from colbench.config.contend import parse_contend
from colbench.config.model import SweepConfig
from colbench.host.launchers.rendezvous import free_port
from colbench.results.rows import RESULTS, load
from colbench.results.tables import TableWriter
from tests.fakenccl import FAKE_NCCL, records

pytestmark = pytest.mark.dist

OPS = ("all_reduce", "all_gather", "broadcast", "sendrecv")


@dataclasses.dataclass(frozen=True)
class World:
    """One forked world: its ranks, what the sweep asks, what the fake NCCL answers."""

    ranks: int = 2
    register: str = "none"
    group_size: int | None = None
    contend: str | None = None
    nccl_version: int = 22809
    fake_register: str = ""


def _rank(rank: int, world: World, port: int, out: str) -> None:
    os.environ["COLBENCH_FAKE_NCCL_DIR"] = out
    os.environ["COLBENCH_FAKE_NCCL_VERSION"] = str(world.nccl_version)
    os.environ["COLBENCH_FAKE_NCCL_REGISTER"] = world.fake_register
    sys.path.insert(0, str(FAKE_NCCL))
    from colbench.direct.engine import DirectEngine, group_ranks

    n = world.ranks
    store = dist.TCPStore(
        "127.0.0.1", port, n, is_master=rank == 0, timeout=datetime.timedelta(seconds=60)
    )
    dist.init_process_group("gloo", store=store, rank=rank, world_size=n)
    try:
        load_spec = parse_contend(world.contend) if world.contend else None
        cfg = SweepConfig.of(
            ops=OPS, sizes_bytes=(1024, 65536), dtypes=("float32",), iters=3, warmup=1,
            engines=("nccl",), register=world.register, group_size=world.group_size,
            contend=load_spec,
        )  # fmt: skip
        side = SideGroup(dist.new_group(backend="gloo"), n)
        layout = members(world.group_size, None, n)
        subgroup = split_world(layout, rank, 60.0) if layout else None
        ranks = group_ranks(subgroup, n)
        engine = DirectEngine.create(
            side, rank, ranks, register=world.register, device=torch.device("cpu")
        )
        info = RunInfo(
            "knobs", "gloo", "cpu", n, 1, groups=subgroup.count if subgroup else 1,
            engine="nccl", load=load_spec.label if load_spec else "",
        )  # fmt: skip
        context = BenchContext.on_cpu(cfg, info, rank, Groups(side, subgroup))
        load_run = (
            make_load(load_spec, cfg, torch.device("cpu"), rank, n, "gloo", 60.0)
            if load_spec
            else None
        )
        context = dataclasses.replace(context, engine=engine, load=load_run)
        writer = TableWriter(Path(out) / "results.csv", RESULTS) if rank == 0 else None
        notes: list[str] = []

        class Sink:
            def rows(self, coll: Any, rows: Any) -> None:
                assert writer is not None
                for row in rows:
                    writer.write(row)

            def note(self, message: str) -> None:
                notes.append(message)

        work = plan(cfg, len(ranks), "gloo")
        RankBench(context, Sink() if writer is not None else None).run(work)
        engine.close()
        if writer is not None:
            writer.close()
            (Path(out) / "notes.json").write_text(json.dumps(notes))
    finally:
        dist.destroy_process_group()


def _run(tmp: Path, world: World) -> tuple[pd.DataFrame, list[dict[str, Any]], list[str]]:
    tmp.mkdir()
    # Forked, as colbench starts its gloo ranks: a rank is ready without importing torch
    # again (seconds of CPU each); the fake NCCL and its variables enter the child only.
    mp.start_processes(
        _rank, args=(world, free_port(), str(tmp)), nprocs=world.ranks, start_method="fork"
    )
    notes = json.loads((tmp / "notes.json").read_text())
    return load(tmp / "results.csv"), records(tmp), notes


@pytest.fixture(scope="module")
def local_loaded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return _run(tmp_path_factory.mktemp("knobs") / "local", World(register="local",
                contend="all_reduce:1K"))  # fmt: skip


@pytest.fixture(scope="module")
def symmetric_groups(tmp_path_factory: pytest.TempPathFactory) -> Any:
    world = World(ranks=4, register="symmetric", group_size=2)
    return _run(tmp_path_factory.mktemp("knobs") / "symmetric", world)


def test_registered_buffers_are_exact_and_each_allocation_registered_once(
    local_loaded: Any,
) -> None:
    frame, calls, notes = local_loaded
    assert set(frame["op"]) == set(OPS)
    assert (frame["status"] == "ok").all() and (frame["wrong"] == 0).all()
    assert not notes
    by_pid: dict[int, list[dict[str, Any]]] = {}
    for c in calls:
        by_pid.setdefault(c["pid"], []).append(c)
    for own in by_pid.values():
        allocs = [c for c in own if c["call"] == "mem_alloc"]
        registered = [c for c in own if c["call"] == "comm_register"]
        # The start-up's trial registration, then one per ncclMemAlloc of the plan.
        assert len(registered) == len(allocs)
        released = Counter(c["ptr"] for c in own if c["call"] == "comm_deregister")
        assert released == Counter(c["ptr"] for c in registered)


def test_a_contend_load_runs_beside_the_direct_engine(local_loaded: Any) -> None:
    frame, calls, _ = local_loaded
    # The load's collective went over its own (gloo) group; the measured calls still
    # went to NCCL, and the rows carry the load's rate beside them.
    assert set(frame["load"]) == {"all_reduce:1K:float32"}
    assert frame["load_beside_busbw_gbps"].notna().all()
    assert {"all_reduce", "all_gather", "broadcast"} <= {c["call"] for c in calls}


def test_group_size_makes_a_communicator_per_group(symmetric_groups: Any) -> None:
    frame, calls, notes = symmetric_groups
    assert (frame["status"] == "ok").all() and (frame["wrong"] == 0).all(), notes
    assert set(frame["groups"]) == {2}
    made = [c for c in calls if c["call"] == "get_unique_id"]
    inits = [c for c in calls if c["call"] == "comm_init"]
    # Each group's first rank made an id; each rank joined its group's, as rank 0 or 1 of 2.
    assert len(made) == 2
    assert sorted((c["rank"], c["nranks"]) for c in inits) == [(0, 2), (0, 2), (1, 2), (1, 2)]
    assert Counter(c["id"] for c in inits) == Counter({m["id"]: 2 for m in made})


def test_symmetric_windows_are_registered_in_the_same_order_on_every_rank(
    symmetric_groups: Any,
) -> None:
    _, calls, _ = symmetric_groups
    windows = [c for c in calls if c["call"] == "comm_window_register"]
    assert windows and {c["flags"] for c in windows} == {1}  # NCCL_WIN_COLL_SYMMETRIC
    # A window is collective: every rank registers as many, of the same sizes, in order.
    per_pid: dict[int, list[int]] = {}
    for c in windows:
        per_pid.setdefault(c["pid"], []).append(c["size"])
    assert len(per_pid) == 4 and len({tuple(s) for s in per_pid.values()}) == 1


@pytest.mark.parametrize(
    ("world", "reason"),
    [
        (
            World(register="symmetric", nccl_version=22605),
            "--register symmetric needs ncclCommWindowRegister, NCCL 2.27.0+; this NCCL is 2.26.5",
        ),
        (
            World(register="local", fake_register="skip"),
            "--register local: NCCL answered ncclCommRegister with no handle",
        ),
    ],
    ids=["nccl-too-old", "nccl-skips"],
)
def test_a_registration_nccl_cannot_make_is_unsupported_rows_with_the_reason(
    tmp_path: Path, world: World, reason: str
) -> None:
    frame, calls, notes = _run(tmp_path / "refused", world)
    assert set(frame["status"]) == {"unsupported"}
    assert set(frame["op"]) == set(OPS)
    assert len(notes) == len(OPS)
    assert all(f"unsupported on --engine nccl: {reason}" in note for note in notes), notes
    # Nothing measured: no collective reached NCCL.
    assert not {"all_reduce", "all_gather", "broadcast", "group"} & {c["call"] for c in calls}


def test_the_whole_command_gives_each_group_its_own_communicator(tmp_path: Path) -> None:
    """``colbench sweep --engine nccl --group-size 2`` on 4 fake GPUs: the CLI, the
    parent's checks, spawned ranks; they stop at the first fill (no CUDA memory here),
    after their communicators exist."""
    from tests.fakegpu import FAKE_GPU, REPO, gpu, run_on_fake_gpus

    nccl_dir = tmp_path / "nccl"
    nccl_dir.mkdir()
    env = {
        "PYTHONPATH": os.pathsep.join(map(str, (FAKE_GPU, FAKE_NCCL, REPO))),
        "COLBENCH_FAKE_NCCL_DIR": str(nccl_dir),
    }
    run = run_on_fake_gpus(
        tmp_path, [gpu(i) for i in range(4)], "sweep", "--engine", "nccl", "--group-size", "2",
        "--sizes", "1K", "--no-table", "--no-nccl-probe", "--out", str(tmp_path / "run"),
        env=env,
    )  # fmt: skip
    assert run.returncode == 3, run.stderr
    assert "fill of all_reduce" in run.stderr
    calls = records(nccl_dir)
    made = [c for c in calls if c["call"] == "get_unique_id"]
    inits = [c for c in calls if c["call"] == "comm_init"]
    assert len(made) == 2
    assert sorted((c["rank"], c["nranks"]) for c in inits) == [(0, 2), (0, 2), (1, 2), (1, 2)]
    assert Counter(c["id"] for c in inits) == Counter({m["id"]: 2 for m in made})
